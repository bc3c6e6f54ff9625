#include "step/step_walk.h"

#include <algorithm>
#include <limits>

namespace census {

StepWalk::StepWalk(const StepBytes& bytes) : b_(bytes) {
  key_base_ = b_.replay_key_bases(keys_);
  for (size_t s = 0; s < key_base_.size(); ++s)
    if (key_base_[s] >= 0) replay_bases_.emplace_back(key_base_[s], static_cast<int64_t>(s));
  phase_of_.resize(b_.segments_.size(), 0);
  size_t p = 0;
  for (size_t s = 0; s < b_.segments_.size(); ++s) {
    while (p + 1 < b_.phases_.size() && b_.phases_[p + 1].second <= b_.segments_[s].start) ++p;
    phase_of_[s] = p;
  }
}

StepWalk::Origin StepWalk::origin(int64_t key) const {
  if (key < static_cast<int64_t>(b_.storages_.size())) return {};
  // the replay whose keys start last at or before `key`
  auto it = std::upper_bound(replay_bases_.begin(), replay_bases_.end(), std::pair{key, std::numeric_limits<int64_t>::max()});
  --it;
  return {it->second, key - it->first};
}

bool StepWalk::replay_phase(size_t s) const {
  const auto& segments = b_.segments_;
  const auto& phases = b_.phases_;
  if (s >= segments.size() || !segments[s].replayed || segments[s].length == 0 || phases.empty()) return false;
  const size_t p = phase_of_[s];
  const int64_t start = segments[s].start, end = start + segments[s].length;
  if (phases[p].second != start || (p > 0 && phases[p - 1].second == start)) return false;
  return p + 1 < phases.size() ? phases[p + 1].second == end : end == b_.events_logged_;
}

bool StepWalk::alike(int64_t a, int64_t b) const {
  const auto n = static_cast<int64_t>(b_.segments_.size());
  if (a < 0 || b < 0 || a >= n || b >= n) return false;
  const StepBytes::Segment& x = b_.segments_[static_cast<size_t>(a)];
  const StepBytes::Segment& y = b_.segments_[static_cast<size_t>(b)];
  return x.replayed && y.replayed && x.from == y.from && x.length == y.length && x.slots_from == y.slots_from &&
         (x.forward < 0) == (y.forward < 0) && (x.forward < 0 || a - x.forward == b - y.forward);
}

size_t StepWalk::repeats(size_t segment, size_t period) const {
  if (period == 0 || period > segment) return 0;
  auto matches = [&](size_t from) {  // the period starting at `from` replays the one before `segment`
    for (size_t d = 0; d < period; ++d) {
      const size_t here = from + d, there = segment - period + d;
      if (!replay_phase(here) || !replay_phase(there) ||
          !alike(static_cast<int64_t>(there), static_cast<int64_t>(here)))
        return false;
    }
    return true;
  };
  size_t r = 0;
  while (segment + (r + 1) * period <= b_.segments_.size() && matches(segment + r * period)) ++r;
  return r;
}

}  // namespace census
