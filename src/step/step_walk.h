// File: step_walk.h
// Every event of a step's log (step/step_bytes.h) in order, each replayed pass expanded as a pass of
// its own storages: what a walker that needs each allocation and free (the caching allocator,
// step/step_alloc.h) reads instead of the peaks analyse() folds.
//
// Note [Repeating replays]: a later micro-batch's pass is a replay of a recorded one, so a schedule's
// steady part is the same few replays over and over (1F1B: a forward and a backward, each its own
// phase). A walker whose state before replay i equals its state before replay i - L (up to the replays'
// storages, L segments apart) will do over the next L segments exactly what it did over the L before
// them, and so on for every period the log repeats: it may skip those periods and take their
// figures from the period it ran. on_replay offers the skip; repeat_period says how far the log repeats.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "step/step_bytes.h"

namespace census {

// One event of the walk: a storage's birth (bytes > 0) or its death (bytes < 0), at the bytes the
// walk's weights give it.
struct StepEvent {
  int64_t storage;  // distinct for every storage of the step: a replay's storages are new ones
  int64_t bytes;
  StepCategory category;
  bool off_device;      // a host tensor a CUDA run keeps off the device (StepBytes::note_off_device)
  std::string_view op;  // the allocating op; "free" for a death
  StepStream stream;    // the stream it is allocated on
};

// Segments a visitor skips: a whole number of periods of `period` segments (Note [Repeating replays]).
struct StepSkip {
  size_t segments = 0;
  size_t period = 0;
};

class StepEventVisitor {
 public:
  virtual ~StepEventVisitor() = default;
  // Each phase as it starts (every phase, one without events too), before its events.
  virtual void on_phase(size_t phase, std::string_view name) = 0;
  virtual void on_event(const StepEvent& event) = 0;
  // Before replayed segment `segment`: the segments from it to skip (Note [Repeating replays]).
  virtual StepSkip on_replay(size_t /*segment*/) { return {}; }
  // A phase of the skipped segments: phase `same_as`, which the walker ran, over again.
  virtual void on_repeated_phase(size_t /*phase*/, std::string_view /*name*/, size_t /*same_as*/) {}
};

class StepWalk {
 public:
  explicit StepWalk(const StepBytes& bytes);

  // Every event in order at `weights`' bytes (a storage's category share, as analyse() weighs it;
  // during_passes is the visitor's to add). A template, so a final visitor's calls are inlined: the
  // allocator's walk is over every event of every replay.
  template <class Visitor>
  void run(Visitor& visitor, const StepWeights& weights = {}) const;

  // Where storage `key` was made: a replayed segment and its offset among the recorded pass's
  // storages, or segment -1 for a storage the engine made.
  struct Origin {
    int64_t segment = -1;
    int64_t offset = 0;
  };
  Origin origin(int64_t key) const;
  // How many storage keys the walk names (each below it).
  int64_t keys() const { return keys_; }
  // The key of the storage at `offset` of replayed segment `segment`.
  int64_t key_in(int64_t segment, int64_t offset) const {
    return key_base_[static_cast<size_t>(segment)] + offset;
  }
  // How many whole periods of `period` segments from `segment` replay, in order, the `period` replayed
  // segments before it (0: none): the same passes, each a phase of its own, a backward freeing the
  // storages of a forward as many segments behind.
  size_t repeats(size_t segment, size_t period) const;
  // Whether two replayed segments replay the same pass, their backward's forward as far behind.
  bool alike(int64_t a, int64_t b) const;

 private:
  // Whether segment `s` is a replay that is a phase of its own.
  bool replay_phase(size_t s) const;

  const StepBytes& b_;
  std::vector<int64_t> key_base_;  // by segment: a replay's first key (-1 for the engine's segments)
  std::vector<std::pair<int64_t, int64_t>> replay_bases_;  // (first key, segment) of each replay, in order
  std::vector<size_t> phase_of_;   // by segment: the last phase that starts at or before its start
  int64_t keys_ = 0;
};

template <class Visitor>
void StepWalk::run(Visitor& visitor, const StepWeights& weights) const {
  const bool identity = weights.identity();
  // A storage's weighted bytes, by slot: its birth's and its death's, the same for each replay of it.
  std::vector<int64_t> weighted;
  if (!identity) weighted.assign(b_.storages_.size(), -1);
  auto bytes_of = [&](const StepBytes::Event& e) {
    if (identity) return e.delta_bytes;
    int64_t& w = weighted[static_cast<size_t>(e.slot)];
    if (w < 0) w = b_.weighted(StepBytes::Event{e.slot, e.resize, e.delta_bytes > 0 ? e.delta_bytes : -e.delta_bytes, e.op}, weights);
    return e.delta_bytes > 0 ? w : -w;
  };
  const auto& phases = b_.phases_;
  const auto& segments = b_.segments_;
  size_t phase = 0;
  auto phases_until = [&](int64_t event) {  // every phase that starts at or before `event`
    for (; phase < phases.size() && phases[phase].second <= event; ++phase) visitor.on_phase(phase, phases[phase].first);
  };
  for (size_t i = 0; i < segments.size();) {
    const StepBytes::Segment& seg = segments[i];
    if (seg.replayed) {
      const StepSkip skip = visitor.on_replay(i);
      if (skip.segments > 0) {
        // The skipped segments are whole phases, one each (repeats() checked it): the t-th is the phase
        // of the segment a period before its place in the period.
        for (size_t t = 0; t < skip.segments; ++t, ++phase)
          visitor.on_repeated_phase(phase, phases[phase].first, phase_of_[i - skip.period + t % skip.period]);
        i += skip.segments;
        continue;
      }
    }
    const StepBytes::SegmentKeys keys = b_.segment_keys(key_base_, i);
    const StepBytes::Event* events = b_.events_.data() + seg.from;
    // the next phase's first event, as an offset in the segment (past its end: none within it)
    auto next_phase_at = [&] { return phase < phases.size() ? phases[phase].second - seg.start : seg.length; };
    int64_t phase_at = next_phase_at();
    for (int64_t k = 0; k < seg.length; ++k) {
      if (phase_at <= k) {
        phases_until(seg.start + k);
        phase_at = next_phase_at();
      }
      const StepBytes::Event& e = events[k];
      const StepBytes::StorageInfo& s = b_.storages_[static_cast<size_t>(e.slot)];
      visitor.on_event(StepEvent{keys.of(e), bytes_of(e), s.category, s.off_device, e.op, s.stream});
    }
    ++i;
  }
  phases_until(b_.events_logged_);
}

}  // namespace census
