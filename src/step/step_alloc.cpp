#include "step/step_alloc.h"

#include <algorithm>
#include <cassert>
#include <deque>
#include <optional>

#include "step/step_walk.h"

namespace census {
namespace {

// Note [What the allocator sees]: see step_alloc.h. The events come from StepWalk, each replayed
// pass's storages distinct, so a storage's block is found again at its free by its key; a schedule's
// steady replays, once the allocator is back where it was a period before, are not run again but
// taken from the period it ran (Note [Repeating replays], step/step_walk.h).
class AllocatorFeeder final : public StepEventVisitor {
 public:
  AllocatorFeeder(const StepWalk& walk, const StepWeights& weights, const StepAllocatorOptions& options)
      : walk_(walk),
        allocator_(options.conf, options.device_limit, options.device_total > 0 ? options.device_total : int64_t{1} << 40),
        during_passes_(weights.during_passes), every_storage_(options.every_storage_on_device) {
    block_of_.assign(static_cast<size_t>(walk.keys()), alloc::kOutOfMemory);
    out_.limited = options.device_limit != alloc::kNoDeviceLimit;
    if (out_.limited) out_.device_limit = options.device_limit;
  }

  // Note [The first step warms the cache]: in the steady state the allocator starts where the first step
  // left it. The walk runs twice: first as the first step (every storage the step's setup makes but its
  // optimizer's states, which the first step makes as its optimizer step begins, _init_group before the
  // update), reporting nothing but an out-of-memory; then as the step priced, whose setup finds the
  // parameters, buffers and states in the blocks the first step gave them.
  void begin_first_step() { first_step_ = true; }
  void begin_priced_step() {
    first_step_ = false;
    in_setup_ = false;
    snapshots_.clear();
    layouts_unequal_ = 0;
    warm_ = counters();
    out_.off_device_storages = out_.off_device_bytes = 0;
    warm_reserved_ = allocator_.stats().reserved_bytes.current;
  }

  void on_phase(size_t phase, std::string_view name) override {
    if (failed_) return;
    close_phase();
    if (pass_block_ >= 0) {  // the previous pass's composed block, freed as its pass ends
      free_block(pass_block_);
      pass_block_ = -1;
    }
    allocator_.reset_peak_stats();
    in_setup_ = phase == 0;
    phase_.name = std::string(name);
    open_ = !first_step_;
    if (!first_step_ && phase == 0 && warm_reserved_ > 0) {  // the first step's segments, cached
      out_.reserved_peak = warm_reserved_;
      out_.reserved_peak_phase = phase_.name;
      out_.reserved_peak_op = kFirstStepsCache;
    }
    if (first_step_ && name == "optimizer_step") {  // _init_group: the states, in order, before the update
      for (const Deferred& d : deferred_) block_of(d.key) = allocate(d.bytes, d.op, d.key, d.stream);
      deferred_.clear();
    }
    if (during_passes_ > 0 && StepBytes::is_pass_phase(name)) pass_block_ = allocate(during_passes_, kDuringPass, -1);
  }

  void on_event(const StepEvent& e) override {
    if (failed_ || e.bytes == 0) return;  // a storage composed to no bytes: nothing allocated
    if (e.bytes > 0) {
      if (e.off_device && !every_storage_) {
        ++out_.off_device_storages;
        out_.off_device_bytes += e.bytes;
        return;
      }
      if (in_setup_ && first_step_ && e.category == StepCategory::kOptimizerStates) {
        deferred_.push_back({e.storage, e.bytes, e.op, e.stream});
        return;
      }
      // The priced step's setup: what the first step made and kept (parameters, buffers, states)
      // holds its block already.
      if (in_setup_ && warm_.has_value() && block_of(e.storage) != alloc::kOutOfMemory) return;
      block_of(e.storage) = allocate(e.bytes, e.op, e.storage, e.stream);
      return;
    }
    alloc::BlockId& block = block_of(e.storage);
    if (block == alloc::kOutOfMemory) return;  // never on the device
    free_block(block);
    block = alloc::kOutOfMemory;
  }

  // Note [Repeating replays]: the allocator's layout here, its owners labelled relative to `segment`,
  // against the layouts a period or more before; where one matches and the log repeats from here, skip.
  StepSkip on_replay(size_t segment) override {
    if (failed_) return {};
    if (layouts_unequal_ >= kLayoutsCompared) return {};  // the allocator does not come back: give up
    Snapshot now{segment, fingerprint(), {}, counters()};
    for (auto it = snapshots_.rbegin(); it != snapshots_.rend(); ++it) {
      const size_t period = segment - it->segment;
      if (period > kLongestPeriod) break;
      if (it->fingerprint != now.fingerprint || it->layout.empty()) continue;  // not kept: compared a period on
      const size_t repeats = walk_.repeats(segment, period);
      if (repeats == 0) continue;
      if (now.layout.empty()) now.layout = layout(segment);
      if (it->layout != now.layout || !relabel(period * repeats)) {
        ++layouts_unequal_;
        continue;
      }
      // every counter moves in each repeated period as it did in the one run
      const Counters& before = it->counters;
      retries_ += static_cast<int64_t>(repeats) * (now.counters.retries - before.retries);
      device_allocs_ += static_cast<int64_t>(repeats) * (now.counters.device_allocs - before.device_allocs);
      device_frees_ += static_cast<int64_t>(repeats) * (now.counters.device_frees - before.device_frees);
      out_.off_device_storages += static_cast<int64_t>(repeats) * (now.counters.off_device_storages - before.off_device_storages);
      out_.off_device_bytes += static_cast<int64_t>(repeats) * (now.counters.off_device_bytes - before.off_device_bytes);
      close_phase();
      snapshots_.clear();
      return {period * repeats, period};
    }
    // keep the layout only where it may be compared: a period back has the same fingerprint
    bool candidate = false;
    for (const Snapshot& s : snapshots_) candidate = candidate || s.fingerprint == now.fingerprint;
    if (candidate && now.layout.empty()) now.layout = layout(segment);
    snapshots_.push_back(std::move(now));
    while (!snapshots_.empty() && segment - snapshots_.front().segment > kLongestPeriod) snapshots_.pop_front();
    return {};
  }

  void on_repeated_phase(size_t /*phase*/, std::string_view name, size_t same_as) override {
    if (first_step_) return;  // nothing of the first step is reported
    StepAllocatorPhase repeated = out_.phases[same_as];
    repeated.name = std::string(name);
    out_.phases.push_back(std::move(repeated));
  }

  StepAllocatorCensus finish() {
    close_phase();
    const Counters c = counters();
    const Counters before = warm_.value_or(Counters{});  // the priced step's own
    out_.num_alloc_retries = c.retries - before.retries;
    out_.device_allocs = c.device_allocs - before.device_allocs;
    out_.device_frees = c.device_frees - before.device_frees;
    return std::move(out_);
  }

 private:
  static constexpr std::string_view kDuringPass = "composed: held through the pass";
  static constexpr std::string_view kFirstStepsCache = "the segments the first step reserved";
  static constexpr size_t kLongestPeriod = 16;  // segments: 1F1B's is 2, an interleaved schedule's 2 a chunk
  // Layouts found unequal where their fingerprints matched before the search stops: where free blocks
  // drift from one period to the next (a pipeline's first stage, many micro-batches in flight), the
  // allocator never comes back to a layout, and every comparison costs a sort of its blocks.
  static constexpr int kLayoutsCompared = 8;

  struct Counters {
    int64_t retries = 0, device_allocs = 0, device_frees = 0, off_device_storages = 0, off_device_bytes = 0;
  };
  // A first step's optimizer state, made as its optimizer step begins.
  struct Deferred {
    int64_t key;
    int64_t bytes;
    std::string_view op;
    StepStream stream;
  };
  struct Snapshot {
    size_t segment;
    std::vector<int64_t> fingerprint;
    std::vector<int64_t> layout;  // empty: not kept
    Counters counters;
  };

  Counters counters() const {
    const alloc::AllocatorStats& s = allocator_.stats();
    return {s.num_alloc_retries + retries_, s.num_device_alloc + device_allocs_, s.num_device_free + device_frees_,
            out_.off_device_storages, out_.off_device_bytes};
  }

  std::vector<int64_t> fingerprint() const {
    const alloc::AllocatorStats& s = allocator_.stats();
    return {s.allocation.current, s.allocated_bytes.current, s.reserved_bytes.current, s.requested_bytes.current,
            s.inactive_split_bytes.current, s.segment.current, static_cast<int64_t>(allocator_.cached_blocks())};
  }

  // Each allocated block's owner: the composed pass block; a storage the engine made, by its key; a
  // replayed one by how many segments before `segment` its replay is, and its place in it.
  std::vector<int64_t> layout(size_t segment) const {
    return allocator_.layout([&](alloc::BlockId block) -> int64_t {
      const int64_t key = key_of_block_[static_cast<size_t>(block)];
      if (key < 0) return -1;
      const StepWalk::Origin o = walk_.origin(key);
      if (o.segment < 0) return key;
      return -2 - ((static_cast<int64_t>(segment) - o.segment) << 32 | o.offset);
    });
  }

  // The storages of replays alive now, as the ones `segments` later (the same passes, a whole number
  // of periods on); false where one has no counterpart there.
  bool relabel(size_t segments) {
    const auto shift = static_cast<int64_t>(segments);
    std::vector<std::pair<size_t, int64_t>> moves;  // block, its new key
    for (size_t block = 0; block < key_of_block_.size(); ++block) {
      const int64_t key = key_of_block_[block];
      if (key < 0) continue;
      const StepWalk::Origin o = walk_.origin(key);
      if (o.segment < 0) continue;
      if (!walk_.alike(o.segment, o.segment + shift)) return false;
      moves.emplace_back(block, walk_.key_in(o.segment + shift, o.offset));
    }
    for (const auto& [block, moved] : moves) block_of(key_of_block_[block]) = alloc::kOutOfMemory;
    for (const auto& [block, moved] : moves) {
      block_of(moved) = static_cast<alloc::BlockId>(block);
      key_of_block_[block] = moved;
    }
    return true;
  }

  alloc::BlockId& block_of(int64_t key) {
    assert(key >= 0 && key < static_cast<int64_t>(block_of_.size()));  // every key is below walk.keys()
    return block_of_[static_cast<size_t>(key)];
  }

  alloc::BlockId allocate(int64_t bytes, std::string_view op, int64_t key, StepStream stream = StepStream::kCompute) {
    const alloc::BlockId block = allocator_.malloc(bytes, static_cast<int32_t>(stream));
    if (block == alloc::kOutOfMemory) {
      failed_ = true;
      out_.out_of_memory = true;
      out_.out_of_memory_phase = (first_step_ ? "the first step's " : "") + phase_.name;
      out_.out_of_memory_op = op;
      out_.out_of_memory_request = bytes;
      return block;
    }
    if (static_cast<size_t>(block) >= key_of_block_.size())
      key_of_block_.resize(std::max<size_t>(static_cast<size_t>(block) + 1, 2 * key_of_block_.size()), -1);
    key_of_block_[static_cast<size_t>(block)] = key;
    const int64_t reserved = allocator_.stats().reserved_bytes.current;
    if (!first_step_ && reserved > out_.reserved_peak) {
      out_.reserved_peak = reserved;
      out_.reserved_peak_phase = phase_.name;
      out_.reserved_peak_op = op;
    }
    return block;
  }

  void free_block(alloc::BlockId block) {
    allocator_.free(block);
    key_of_block_[static_cast<size_t>(block)] = -1;
  }

  // The phase's peaks (its start level included: the peaks were reset to it) into the step's.
  void close_phase() {
    if (!open_) {
      phase_ = StepAllocatorPhase();
      return;
    }
    const alloc::AllocatorStats& s = allocator_.stats();
    phase_.reserved_peak = s.reserved_bytes.peak;
    phase_.allocated_peak = s.allocated_bytes.peak;
    phase_.requested_peak = s.requested_bytes.peak;
    phase_.reserved_at_end = s.reserved_bytes.current;
    phase_.allocated_at_end = s.allocated_bytes.current;
    out_.allocated_peak = std::max(out_.allocated_peak, s.allocated_bytes.peak);
    out_.requested_peak = std::max(out_.requested_peak, s.requested_bytes.peak);
    out_.largest_inactive_split = std::max(out_.largest_inactive_split, s.inactive_split_bytes.peak);
    out_.segments_peak = std::max(out_.segments_peak, s.segment.peak);
    out_.phases.push_back(std::move(phase_));
    phase_ = StepAllocatorPhase();
    open_ = false;
  }

  const StepWalk& walk_;
  alloc::CachingAllocator allocator_;
  int64_t during_passes_;
  bool every_storage_;
  std::vector<alloc::BlockId> block_of_;  // by storage key: its block, or kOutOfMemory (none)
  std::vector<int64_t> key_of_block_;     // by block: its storage's key (-1: the pass block, or none)
  alloc::BlockId pass_block_ = alloc::kOutOfMemory;
  StepAllocatorPhase phase_;
  bool open_ = false;
  bool failed_ = false;
  std::deque<Snapshot> snapshots_;  // at the replays of the last kLongestPeriod segments
  int64_t retries_ = 0, device_allocs_ = 0, device_frees_ = 0;  // of the periods skipped
  int layouts_unequal_ = 0;
  StepAllocatorCensus out_;
  // Note [The first step warms the cache]
  bool first_step_ = false;           // walking the first step: nothing reported
  bool in_setup_ = false;             // in the step's first phase
  std::vector<Deferred> deferred_;    // the first step's states, made at its optimizer step
  std::optional<Counters> warm_;      // the counters as the priced step began, after a first step
  int64_t warm_reserved_ = 0;         // the reserved bytes then
};

}  // namespace

StepAllocatorCensus simulate_step_allocator(const StepBytes& bytes, const StepWeights& weights,
                                            const StepAllocatorOptions& options, bool steady_state) {
  const StepWalk walk(bytes);
  AllocatorFeeder feeder(walk, weights, options);
  if (steady_state) {  // Note [The first step warms the cache]
    feeder.begin_first_step();
    walk.run(feeder, weights);
    feeder.begin_priced_step();
  }
  walk.run(feeder, weights);
  return feeder.finish();
}

}  // namespace census
