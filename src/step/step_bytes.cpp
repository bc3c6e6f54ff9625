#include "step/step_bytes.h"

#include <algorithm>
#include <array>
#include <bit>
#include <deque>
#include <map>

namespace census {
namespace {

// A moment while a walk of the log runs: its phase by index, named once the walk is done.
struct Mark {
  int64_t bytes = -1;
  std::string_view op;
  int64_t event = -1;
  StepSplit split;
  size_t phase = 0;
};

}  // namespace

std::string_view step_category_name(StepCategory category) {
  switch (category) {
    case StepCategory::kActivations: return "activations";
    case StepCategory::kFsdpAllGatherBuffers: return "fsdp_all_gather_buffers";
    case StepCategory::kFsdpUnshardedParams: return "fsdp_unsharded_params";
    case StepCategory::kFsdpReduceScatterBuffers: return "fsdp_reduce_scatter_buffers";
    case StepCategory::kFsdpUnshardedGrads: return "fsdp_unsharded_grads";
    case StepCategory::kParamGradInflight: return "param_grad_inflight";
    case StepCategory::kInputs: return "inputs";
    case StepCategory::kBuffers: return "buffers";
    case StepCategory::kOptimizerStates: return "optimizer_states";
    case StepCategory::kGradients: return "gradients";
    case StepCategory::kParameters: return "parameters";
    case StepCategory::kCount: break;
  }
  return "?";
}

int32_t StepBytes::slot(int64_t storage_id) {
  if (storage_id >= static_cast<int64_t>(slot_of_.size())) slot_of_.resize(static_cast<size_t>(storage_id) + 256, 0);
  int32_t& entry = slot_of_[static_cast<size_t>(storage_id)];
  if (entry == 0) {
    storages_.emplace_back();
    entry = static_cast<int32_t>(storages_.size());
  }
  return entry - 1;
}

int32_t StepBytes::find_slot(int64_t storage_id) const {
  if (storage_id < 0 || storage_id >= static_cast<int64_t>(slot_of_.size())) return -1;
  return slot_of_[static_cast<size_t>(storage_id)] - 1;
}

void StepBytes::mark_phase(std::string name) {
  is_optimizer_step_.push_back(name == "optimizer_step");
  phases_.emplace_back(std::move(name), events_logged_);
}

void StepBytes::log(int32_t id, int64_t delta_bytes, std::string_view op, bool resize) {
  if (segments_.empty() || segments_.back().replayed) {
    Segment segment;
    segment.start = events_logged_;
    segment.from = static_cast<int64_t>(events_.size());
    segments_.push_back(segment);
  }
  events_.push_back({id, resize, delta_bytes, op});
  ++segments_.back().length;
  ++events_logged_;
  add_live(delta_bytes);
}

void StepBytes::add_live(int64_t delta_bytes) {
  if (__builtin_add_overflow(live_, delta_bytes, &live_) || live_ > kLargestStepBytes) too_large_ = true;
}

void StepBytes::track(const Tensor& tensor, std::string_view op, int64_t bytes) {
  const Storage& storage = *tensor.storage();
  if (bytes < 0) bytes = storage.nbytes;
  if (bytes == 0) return;
  const int32_t id = slot(storage.id);
  StorageInfo& s = storages_[static_cast<size_t>(id)];
  if (s.live_bytes != 0 || s.excluded) return;
  s.live_bytes = bytes;
  s.op = op;
  s.phase = static_cast<int32_t>(phases_.size()) - 1;
  s.stream = stream_;
  s.host = s.host || on_host_;
  if (s.host) return log_host(id, bytes);
  log(id, bytes, op);
}

void StepBytes::place_on_host(const Tensor& tensor) {
  storages_[static_cast<size_t>(slot(tensor.storage_id()))].host = true;
}

void StepBytes::note_pinned(const Tensor& tensor) {
  storages_[static_cast<size_t>(slot(tensor.storage_id()))].pinned = true;
}

void StepBytes::log_host(int32_t id, int64_t delta_bytes) {
  host_events_.push_back({id, static_cast<int32_t>(phases_.size()) - 1, delta_bytes});
  if (__builtin_add_overflow(host_live_, delta_bytes, &host_live_) || host_live_ > kLargestStepBytes) too_large_ = true;
}

StepHostAnalysis StepBytes::analyse_host() const {
  StepHostAnalysis out;
  out.copied_to_host_bytes = copied_to_host_;
  out.copied_to_device_bytes = copied_to_device_;
  StepSplit split;
  int64_t total = 0, pinned = 0;
  // The caching host allocator's blocks by size class (log2 of the rounded size): in use, and made.
  std::array<int64_t, 64> in_use{}, made{};
  for (const HostEvent& e : host_events_) {
    const StorageInfo& s = storages_[static_cast<size_t>(e.slot)];
    const StepCategory category = s.category == StepCategory::kParameters || s.category == StepCategory::kGradients ||
                                          s.category == StepCategory::kOptimizerStates
                                      ? s.category
                                      : StepCategory::kActivations;
    split.bytes[static_cast<size_t>(category)] += e.delta_bytes;
    total += e.delta_bytes;
    if (total > out.peak_bytes) {
      out.peak_bytes = total;
      out.peak_phase = phases_[static_cast<size_t>(e.phase)].first;
      out.peak_split = split;
    }
    if (!s.pinned) continue;
    pinned += e.delta_bytes;
    out.pinned_peak_bytes = std::max(out.pinned_peak_bytes, pinned);
    const int64_t bytes = e.delta_bytes > 0 ? e.delta_bytes : -e.delta_bytes;
    const auto k = static_cast<size_t>(std::bit_width(static_cast<uint64_t>(bytes) - 1));  // PowerOf2Ceil
    if (e.delta_bytes < 0) {
      --in_use[k];
    } else if (++in_use[k] > made[k]) {
      made[k] = in_use[k];
      out.pinned_reserved_bytes += int64_t{1} << k;
    }
  }
  out.live_at_end = total;
  return out;
}

void StepBytes::note(const Tensor& tensor, StepCategory category) {
  StorageInfo& s = storages_[static_cast<size_t>(slot(tensor.storage_id()))];
  s.category = std::max(s.category, category);
}

void StepBytes::resize(const Tensor& tensor, int64_t bytes, std::string_view op) {
  const int32_t id = slot(tensor.storage_id());
  StorageInfo& s = storages_[static_cast<size_t>(id)];
  if (s.live_bytes == bytes) return;
  const int64_t delta = bytes - s.live_bytes;
  s.live_bytes = bytes;
  if (s.host) return log_host(id, delta);
  log(id, delta, op, /*resize=*/true);
}

void StepBytes::note_off_device(const Tensor& tensor) {
  storages_[static_cast<size_t>(slot(tensor.storage_id()))].off_device = true;
}

void StepBytes::exclude(const Tensor& tensor) {
  storages_[static_cast<size_t>(slot(tensor.storage_id()))].excluded = true;
}

void StepBytes::retract(const Tensor& tensor) {
  const int32_t id = find_slot(tensor.storage_id());
  if (id < 0) return;
  StorageInfo& s = storages_[static_cast<size_t>(id)];
  if (s.live_bytes == 0) return;
  if (s.host) {
    for (HostEvent& e : host_events_) {
      if (e.slot != id || e.phase > 0 || e.delta_bytes <= 0) continue;
      host_live_ -= e.delta_bytes;
      e.delta_bytes = 0;
      s.live_bytes = 0;
      return;
    }
    return;
  }
  const int64_t first_phase_end = phases_.size() > 1 ? phases_[1].second : events_logged_;
  for (size_t i = 0; i < events_.size() && static_cast<int64_t>(i) < first_phase_end; ++i) {
    Event& e = events_[i];
    if (e.slot != id || e.resize || e.delta_bytes <= 0) continue;
    e.delta_bytes = 0;
    add_live(-s.live_bytes);
    s.live_bytes = 0;
    return;
  }
}

bool StepBytes::is_live(const Tensor& tensor) const {
  const int32_t id = find_slot(tensor.storage_id());
  return id >= 0 && storages_[static_cast<size_t>(id)].live_bytes > 0;
}

void StepBytes::on_op(const OpCall& call) {
  for (const Tensor& out : call.outputs) track(out, call.def.name);
}

void StepBytes::on_free(const Storage& storage) {
  const int32_t id = find_slot(storage.id);
  if (id < 0) return;
  StorageInfo& s = storages_[static_cast<size_t>(id)];
  if (s.live_bytes == 0) return;
  const int64_t bytes = s.live_bytes;
  s.live_bytes = 0;
  if (s.host) return log_host(id, -bytes);
  log(id, -bytes, "free");
}

void StepBytes::on_resize(const Storage& storage, int64_t old_nbytes) {
  const int32_t id = find_slot(storage.id);
  if (id < 0) return;
  StorageInfo& s = storages_[static_cast<size_t>(id)];
  if (s.live_bytes != old_nbytes) return;  // not counted (dead, or tracked at bytes of its own)
  s.live_bytes = storage.nbytes;
  if (s.host) return log_host(id, storage.nbytes - old_nbytes);
  log(id, storage.nbytes - old_nbytes, s.op, /*resize=*/true);
}

StepPassLog StepBytes::begin_pass() const {
  StepPassLog log;
  log.events_from = log.events_to = static_cast<int64_t>(events_.size());
  log.slots_from = log.slots_to = static_cast<int32_t>(storages_.size());
  log.copied_to_host = copied_to_host_;
  log.copied_to_device = copied_to_device_;
  return log;
}

void StepBytes::end_pass(StepPassLog& log) const {
  log.events_to = static_cast<int64_t>(events_.size());
  log.slots_to = static_cast<int32_t>(storages_.size());
  log.copied_to_host = copied_to_host_ - log.copied_to_host;
  log.copied_to_device = copied_to_device_ - log.copied_to_device;
}

bool StepBytes::replays(const StepPassLog& pass, const StepPassLog* forward) const {
  auto in = [](int32_t id, const StepPassLog& p) { return id >= p.slots_from && id < p.slots_to; };
  for (int64_t i = pass.events_from; i < pass.events_to; ++i) {
    const Event& e = events_[static_cast<size_t>(i)];
    if (in(e.slot, pass) || e.resize) continue;  // its own storage, or one made before it resized
    if (!(e.delta_bytes < 0 && forward != nullptr && in(e.slot, *forward))) return false;
  }
  return true;
}

int64_t StepBytes::replay(const StepPassLog& pass, int64_t forward) {
  Segment segment;
  segment.start = events_logged_;
  segment.length = pass.events_to - pass.events_from;
  segment.from = pass.events_from;
  segment.replayed = true;
  segment.phase = static_cast<int32_t>(phases_.size()) - 1;
  segment.slots_from = pass.slots_from;
  segment.slots_to = pass.slots_to;
  segment.forward = forward;
  // What the pass does to the live bytes, worked out at its first replay: its net change and its highest
  // point above its start (the live bytes are only watched for kLargestStepBytes), and the storages made
  // before it that it resizes (FSDP2's unsharded parameters), which every replay resizes again: each is
  // one storage, not the replay's own.
  auto [it, first] = replayed_.try_emplace(pass.events_from);
  ReplayedPass& summary = it->second;
  if (first) {
    int64_t level = 0;
    for (int64_t i = pass.events_from; i < pass.events_to; ++i) {
      const Event& e = events_[static_cast<size_t>(i)];
      if (__builtin_add_overflow(level, e.delta_bytes, &level)) summary.overflows = true;
      summary.top = std::max(summary.top, level);
      if (e.resize && (e.slot < pass.slots_from || e.slot >= pass.slots_to)) summary.resizes.push_back(i);
    }
    summary.net = level;
  }
  int64_t top = 0;
  if (summary.overflows || __builtin_add_overflow(live_, summary.top, &top) || top > kLargestStepBytes)
    too_large_ = true;
  add_live(summary.net);
  for (int64_t i : summary.resizes) {
    const Event& e = events_[static_cast<size_t>(i)];
    storages_[static_cast<size_t>(e.slot)].live_bytes += e.delta_bytes;
  }
  events_logged_ += segment.length;
  segments_.push_back(segment);
  copied_to_host_ += pass.copied_to_host;
  copied_to_device_ += pass.copied_to_device;
  return static_cast<int64_t>(segments_.size()) - 1;
}

// A storage's key: its slot, or for a replay's, past every slot, the replay's range then its offset
// in the recorded pass.
std::vector<int64_t> StepBytes::replay_key_bases(int64_t& keys) const {
  std::vector<int64_t> key_base(segments_.size(), -1);
  keys = static_cast<int64_t>(storages_.size());
  for (size_t i = 0; i < segments_.size(); ++i)
    if (segments_[i].replayed) {
      key_base[i] = keys;
      keys += segments_[i].slots_to - segments_[i].slots_from;
    }
  return key_base;
}

StepBytes::SegmentKeys StepBytes::segment_keys(const std::vector<int64_t>& key_base, size_t i) const {
  const Segment& seg = segments_[i];
  SegmentKeys keys;
  keys.replayed = seg.replayed;
  if (!seg.replayed) return keys;
  keys.slots_from = seg.slots_from;
  keys.slots_to = seg.slots_to;
  keys.own_base = key_base[i] - seg.slots_from;
  if (seg.forward >= 0) {
    const auto forward = static_cast<size_t>(seg.forward);
    keys.forward_base = key_base[forward] - segments_[forward].slots_from;
  }
  return keys;
}

std::vector<StepBytes::Live> StepBytes::live_after(int64_t event) const {
  int64_t keys = 0;
  const std::vector<int64_t> key_base = replay_key_bases(keys);
  std::vector<int64_t> live(static_cast<size_t>(keys), 0);
  for (size_t i = 0; i < segments_.size() && segments_[i].start <= event; ++i) {
    const Segment& seg = segments_[i];
    const int64_t n = std::min(seg.length, event + 1 - seg.start);
    for (int64_t k = 0; k < n; ++k) {
      const Event& e = events_[static_cast<size_t>(seg.from + k)];
      live[static_cast<size_t>(storage_key(key_base, i, e))] += e.delta_bytes;  // a birth, a resize, a death
    }
  }
  std::vector<Live> out;
  for (size_t id = 0; id < storages_.size(); ++id)
    if (live[id] > 0) out.push_back({live[id], storages_[id].category, storages_[id].op, storages_[id].phase});
  for (size_t i = 0; i < segments_.size(); ++i) {
    const Segment& seg = segments_[i];
    if (!seg.replayed) continue;
    for (int32_t id = seg.slots_from; id < seg.slots_to; ++id) {
      const int64_t bytes = live[static_cast<size_t>(key_base[i] + (id - seg.slots_from))];
      const StorageInfo& recorded = storages_[static_cast<size_t>(id)];
      if (bytes > 0) out.push_back({bytes, recorded.category, recorded.op, seg.phase});
    }
  }
  return out;
}

bool StepBytes::is_pass_phase(std::string_view name) {
  return name.size() > 1 && (name[0] == 'F' || name[0] == 'B') && name[1] >= '0' && name[1] <= '9';
}

StepBytes::Excursion StepBytes::excursion_of(const Segment& seg, const StepWeights& weights) const {
  const bool identity = weights.identity();
  Excursion x;
  int64_t total = 0;
  for (int64_t k = 0; k < seg.length; ++k) {
    const Event& e = events_[static_cast<size_t>(seg.from + k)];
    const StorageInfo& info = storages_[static_cast<size_t>(e.slot)];
    const int64_t delta = identity ? e.delta_bytes : weighted(e, weights);
    x.net.bytes[static_cast<size_t>(info.category)] += delta;
    x.categories |= uint32_t{1} << static_cast<uint32_t>(info.category);
    x.temporaries = x.temporaries || optimizer_temporary(info);
    total += delta;
    if (x.top_at < 0 || total > x.top) {
      x.top = total;
      x.top_at = k;
      x.at_top = x.net;
    }
    const int64_t other = x.net.other();
    if (x.other_top_at < 0 || other > x.other_top) {
      x.other_top = other;
      x.other_top_at = k;
      x.at_other_top = x.net;
    }
  }
  return x;
}

StepAnalysis StepBytes::analyse(const StepWeights& weights, bool holders) const {
  StepAnalysis out;
  out.events = events_logged_;
  const bool identity = weights.identity();
  auto weighted = [&](const Event& e) { return identity ? e.delta_bytes : this->weighted(e, weights); };
  auto category = [&](const Event& e) { return storages_[static_cast<size_t>(e.slot)].category; };
  // Each recorded pass's excursion, once, however many times it is replayed.
  std::map<int64_t, Excursion> excursions;
  auto excursion = [&](const Segment& seg) -> const Excursion& {
    auto [it, made] = excursions.try_emplace(seg.from);
    if (made) it->second = excursion_of(seg, weights);
    return it->second;
  };
  auto plus = [](StepSplit a, const StepSplit& b) {
    for (size_t c = 0; c < a.bytes.size(); ++c) a.bytes[c] += b.bytes[c];
    return a;
  };

  auto moment = [&](const Mark& m) { return StepMoment{m.bytes, phases_[m.phase].first, m.op, m.event, m.split}; };
  Mark peak, other_peak;
  StepSplit split;
  int64_t total = 0;
  size_t si = 0;
  for (size_t p = 0; p < phases_.size(); ++p) {
    StepPhase phase;
    phase.name = phases_[p].first;
    // Bytes present through a forward or backward pass only (composed), at its start and its end.
    const int64_t extra = is_pass_phase(phase.name) ? weights.during_passes : 0;
    split.bytes[static_cast<size_t>(StepCategory::kActivations)] += extra;
    total += extra;
    phase.events_from = phases_[p].second;
    phase.events_to = p + 1 < phases_.size() ? phases_[p + 1].second : out.events;
    phase.live_at_start = total;
    phase.split_at_start = split;
    Mark phase_peak{total, {}, phase.events_from - 1, split, p};
    for (int64_t v = phase.events_from; v < phase.events_to;) {
      while (segments_[si].start + segments_[si].length <= v) ++si;
      const Segment& seg = segments_[si];
      if (seg.replayed) {  // wholly in this phase: its excursion from where it starts
        const Excursion& x = excursion(seg);
        const int64_t top = total + x.top;
        const std::string_view top_op = events_[static_cast<size_t>(seg.from + x.top_at)].op;
        if (top > phase_peak.bytes) phase_peak = Mark{top, top_op, seg.start + x.top_at, plus(split, x.at_top), p};
        if (top > peak.bytes) peak = Mark{top, top_op, seg.start + x.top_at, plus(split, x.at_top), p};
        if (split.other() + x.other_top > other_peak.bytes) {
          const Event& e = events_[static_cast<size_t>(seg.from + x.other_top_at)];
          other_peak = Mark{split.other() + x.other_top, e.op, seg.start + x.other_top_at, plus(split, x.at_other_top), p};
        }
        split = plus(split, x.net);
        total += x.net.total();
        v = seg.start + seg.length;
        continue;
      }
      const int64_t end = std::min(phase.events_to, seg.start + seg.length);
      // A new high marks its bytes, op and event at once and its split when the split next changes
      // other than by rising to a higher one, or when the run ends: one copy per local top, not one
      // per event of a rise. Between, the split is the high's (an event of no bytes changes nothing).
      bool phase_peak_split_due = false, peak_split_due = false, other_peak_split_due = false;
      int64_t other = split.other();
      for (; v < end; ++v) {
        const Event& e = events_[static_cast<size_t>(seg.from + (v - seg.start))];
        const int64_t delta = weighted(e);
        const StepCategory c = category(e);
        const bool in_other = c != StepCategory::kParameters && c != StepCategory::kGradients &&
                              c != StepCategory::kOptimizerStates;
        if (delta < 0 && phase_peak_split_due) {  // the total falls from a high: its split is now
          phase_peak.split = split;
          phase_peak_split_due = false;
        }
        if (delta < 0 && peak_split_due) {
          peak.split = split;
          peak_split_due = false;
        }
        if (other_peak_split_due && (delta < 0 || (delta > 0 && !in_other))) {
          other_peak.split = split;
          other_peak_split_due = false;
        }
        split.bytes[static_cast<size_t>(c)] += delta;
        total += delta;
        if (in_other) other += delta;
        if (total > phase_peak.bytes) {
          phase_peak.bytes = total, phase_peak.op = e.op, phase_peak.event = v, phase_peak.phase = p;
          phase_peak_split_due = true;
        }
        if (total > peak.bytes) {
          peak.bytes = total, peak.op = e.op, peak.event = v, peak.phase = p;
          peak_split_due = true;
        }
        if (other > other_peak.bytes) {
          other_peak.bytes = other, other_peak.op = e.op, other_peak.event = v, other_peak.phase = p;
          other_peak_split_due = true;
        }
      }
      if (phase_peak_split_due) phase_peak.split = split;
      if (peak_split_due) peak.split = split;
      if (other_peak_split_due) other_peak.split = split;
    }
    phase.peak = moment(phase_peak);
    phase.live_at_end = total;
    phase.split_at_end = split;
    split.bytes[static_cast<size_t>(StepCategory::kActivations)] -= extra;
    total -= extra;
    out.phases.push_back(std::move(phase));
  }
  out.peak.bytes = -1;
  out.other_peak.bytes = -1;
  if (peak.bytes >= 0) out.peak = moment(peak);
  if (other_peak.bytes >= 0) out.other_peak = moment(other_peak);
  if (!holders) return out;
  // What else is live at the peak, by allocating op and phase.
  std::map<std::string, std::pair<StepCategory, int64_t>> by_op;
  for (const Live& held : live_after(out.peak.event)) {
    if (held.category >= StepCategory::kBuffers) continue;
    const std::string label =
        std::string(held.op) + "@" + (held.phase >= 0 ? phases_[static_cast<size_t>(held.phase)].first : "");
    auto& [held_category, bytes] = by_op[std::string(step_category_name(held.category)) + ":" + label];
    held_category = held.category;
    bytes += held.bytes;
  }
  for (const auto& [label, entry] : by_op) out.peak_other_by_op.push_back({label, entry.first, entry.second});
  std::stable_sort(out.peak_other_by_op.begin(), out.peak_other_by_op.end(),
                   [](const StepHolder& a, const StepHolder& b) { return a.bytes > b.bytes; });
  return out;
}

std::vector<StepMoment> StepBytes::highest_phase_peaks(std::span<const StepWeights> weights) const {
  // analyse()'s walk, each phase's peak alone, for every weighting at once: the log is read once, each
  // event's bytes weighed K times. Mark, split and the split's deferred copy as there.
  const size_t n = weights.size();
  if (n == 0) return {};
  std::vector<bool> identity(n);
  for (size_t k = 0; k < n; ++k) identity[k] = weights[k].identity();
  // The categories (and the optimizer step's temporaries) every weighting counts whole.
  std::array<bool, static_cast<size_t>(StepCategory::kCount)> same_by_category{};
  bool same_temporaries = true;
  for (size_t c = 0; c < same_by_category.size(); ++c) {
    same_by_category[c] = true;
    for (const StepWeights& w : weights) same_by_category[c] = same_by_category[c] && w.by_category[c].identity();
  }
  for (const StepWeights& w : weights) same_temporaries = same_temporaries && w.optimizer_temporaries.identity();
  std::vector<Mark> best(n), phase_peak(n);
  std::vector<StepSplit> split(n);
  std::vector<int64_t> total(n, 0);
  std::vector<bool> due(n);
  // Each weighting's excursion of a recorded pass: another weighting's where the two weigh its storages
  // alike (a forward's activations weigh the same under every ZeRO stage), else its own.
  std::vector<std::map<int64_t, const Excursion*>> excursions(n);
  std::deque<Excursion> made_excursions;
  auto alike = [&](const StepWeights& a, const StepWeights& b, const Excursion& x) {
    for (size_t c = 0; c < a.by_category.size(); ++c)
      if ((x.categories >> c & 1) != 0 && a.by_category[c] != b.by_category[c]) return false;
    return !x.temporaries || a.optimizer_temporaries == b.optimizer_temporaries;
  };
  auto excursion = [&](size_t k, const Segment& seg) -> const Excursion& {
    auto [it, made] = excursions[k].try_emplace(seg.from, nullptr);
    if (!made) return *it->second;
    for (size_t j = 0; j < k && it->second == nullptr; ++j) {
      const auto found = excursions[j].find(seg.from);
      if (found != excursions[j].end() && alike(weights[j], weights[k], *found->second)) it->second = found->second;
    }
    if (it->second == nullptr) it->second = &made_excursions.emplace_back(excursion_of(seg, weights[k]));
    return *it->second;
  };
  size_t si = 0;
  for (size_t p = 0; p < phases_.size(); ++p) {
    const int64_t from = phases_[p].second;
    const int64_t to = p + 1 < phases_.size() ? phases_[p + 1].second : events_logged_;
    const bool pass = is_pass_phase(phases_[p].first);
    for (size_t k = 0; k < n; ++k) {
      const int64_t extra = pass ? weights[k].during_passes : 0;
      split[k].bytes[static_cast<size_t>(StepCategory::kActivations)] += extra;
      total[k] += extra;
      phase_peak[k] = Mark{total[k], {}, from - 1, split[k], p};
    }
    for (int64_t v = from; v < to;) {
      while (segments_[si].start + segments_[si].length <= v) ++si;
      const Segment& seg = segments_[si];
      if (seg.replayed) {
        for (size_t k = 0; k < n; ++k) {
          const Excursion& x = excursion(k, seg);
          const int64_t top = total[k] + x.top;
          if (top > phase_peak[k].bytes) {
            StepSplit at = split[k];
            for (size_t c = 0; c < at.bytes.size(); ++c) at.bytes[c] += x.at_top.bytes[c];
            phase_peak[k] = Mark{top, events_[static_cast<size_t>(seg.from + x.top_at)].op, seg.start + x.top_at, at, p};
          }
          for (size_t c = 0; c < split[k].bytes.size(); ++c) split[k].bytes[c] += x.net.bytes[c];
          total[k] += x.net.total();
        }
        v = seg.start + seg.length;
        continue;
      }
      const int64_t end = std::min(to, seg.start + seg.length);
      std::fill(due.begin(), due.end(), false);
      for (; v < end; ++v) {
        const Event& e = events_[static_cast<size_t>(seg.from + (v - seg.start))];
        const StorageInfo& info = storages_[static_cast<size_t>(e.slot)];
        const auto c = static_cast<size_t>(info.category);
        // Most events (activations of a pass) weigh the same under every weighting: weighed once.
        const bool same = optimizer_temporary(info) ? same_temporaries : same_by_category[c];
        for (size_t k = 0; k < n; ++k) {
          const int64_t delta = identity[k] || same ? e.delta_bytes : weighted(e, weights[k]);
          if (delta < 0 && due[k]) {
            phase_peak[k].split = split[k];
            due[k] = false;
          }
          split[k].bytes[c] += delta;
          total[k] += delta;
          if (total[k] > phase_peak[k].bytes) {
            phase_peak[k].bytes = total[k], phase_peak[k].op = e.op, phase_peak[k].event = v;
            due[k] = true;
          }
        }
      }
      for (size_t k = 0; k < n; ++k)
        if (due[k]) phase_peak[k].split = split[k];
    }
    for (size_t k = 0; k < n; ++k) {
      if (phase_peak[k].bytes > best[k].bytes) best[k] = phase_peak[k];
      const int64_t extra = pass ? weights[k].during_passes : 0;
      split[k].bytes[static_cast<size_t>(StepCategory::kActivations)] -= extra;
      total[k] -= extra;
    }
  }
  std::vector<StepMoment> out;
  for (const Mark& m : best)
    out.push_back(m.bytes < 0 ? StepMoment{-1, {}, {}, -1, {}}
                              : StepMoment{m.bytes, phases_[m.phase].first, m.op, m.event, m.split});
  return out;
}

}  // namespace census
