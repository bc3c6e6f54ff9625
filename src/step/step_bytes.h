// File: step_bytes.h
// StepBytes: the heap of one rank's whole training step. Unlike the layer census's LiveBytes it counts
// everything: a storage from the moment an op hands it out (or the step tracks it: parameters and
// buffers at the start, the step's inputs) until it is freed, each birth and death an event, each
// event in a phase (setup, F<i>, B<i>, optimizer_step, zero_grad, end).
//
// Each storage is given a category for its whole life, by what it turned out to be over the step
// (the strongest wins, in this order): activations (the default: saved tensors and temporaries),
// FSDP2's buffers by where they were made (fsdp_all_gather_buffers: a unit's all-gather output and
// its copy-in; fsdp_unsharded_params: the unsharded parameters its copy-out makes; fsdp_reduce_
// scatter_buffers: what its reduce makes that is no .grad), param_grad_inflight (a gradient handed to
// a parameter that did not become its .grad), fsdp_unsharded_grads (an unsharded parameter's
// gradient, handed to the reduce-scatter), inputs, buffers, optimizer_states, gradients (some
// parameter's .grad), parameters. A storage may be resized (FSDP2 frees an unsharded parameter by
// resize_(0) and makes it again by resize_(n)): each resize an event of the bytes it adds. The analysis walks the
// events once: the peak (the running maximum of all live bytes, the first maximum wins), each
// phase's peak, and other_peak (the running maximum of what is neither parameter, gradient nor
// optimizer state), each with the live bytes split by category.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ops/dispatch.h"
#include "util/recycled.h"

namespace census {

// The most bytes one rank's simulated step holds at once: 2^59 B (512 PiB), thousands of times a
// trillion-parameter model's step. Its counts are reweighed (fp32 optimizer states x 3), ZeRO-3's two
// gathered layers and the ring's K/V are added, and so are three stated overheads of up to 2^60 B
// each (step_compose.h): from at most 2^59 live bytes every figure a step prints stays within 64 bits.
// A step past it (a config of 2^28-wide layers, say) is refused, never printed wrapped.
inline constexpr int64_t kLargestStepBytes = int64_t{1} << 59;

// The CUDA stream a storage is allocated on: the caching allocator keeps a pool of free blocks per
// stream and hands a block only to an allocation on its own stream (alloc/caching_allocator.h). Every
// op of the step runs on the compute stream; FSDP2 allocates on two of its own (FSDPCommContext of
// _fsdp_param_group.py): its all-gathers' copy-in and output on the all-gather copy-in stream, its
// reduce-scatters' output (the sharded gradients) on the reduce-scatter stream. (Its all-gather
// stream, 2, runs the collective and allocates nothing.)
enum class StepStream : uint8_t { kCompute = 0, kAllGatherCopyIn = 1, kReduceScatter = 3 };

enum class StepCategory : uint8_t {
  kActivations, kFsdpAllGatherBuffers, kFsdpUnshardedParams, kFsdpReduceScatterBuffers, kParamGradInflight,
  kFsdpUnshardedGrads, kInputs, kBuffers, kOptimizerStates, kGradients, kParameters, kCount,
};

// Live bytes by category.
struct StepSplit {
  std::array<int64_t, static_cast<size_t>(StepCategory::kCount)> bytes{};

  int64_t operator[](StepCategory c) const { return bytes[static_cast<size_t>(c)]; }
  int64_t parameters() const { return (*this)[StepCategory::kParameters]; }
  int64_t gradients() const { return (*this)[StepCategory::kGradients]; }
  int64_t optimizer_states() const { return (*this)[StepCategory::kOptimizerStates]; }
  // Neither parameter, gradient nor optimizer state: buffers, inputs, in-flight gradients, activations.
  int64_t other() const { return total() - parameters() - gradients() - optimizer_states(); }
  int64_t total() const {
    int64_t sum = 0;
    for (int64_t b : bytes) sum += b;
    return sum;
  }
};

// A moment of the step: the live bytes then, where, and the op whose output made them.
struct StepMoment {
  int64_t bytes = 0;
  std::string phase;
  std::string_view op;  // empty where no event rose above the phase's start
  int64_t event = -1;
  StepSplit split;
};

struct StepPhase {
  std::string name;
  int64_t events_from = 0;
  int64_t events_to = 0;
  int64_t live_at_start = 0;
  StepSplit split_at_start;
  StepMoment peak;  // its start level included
  int64_t live_at_end = 0;
  StepSplit split_at_end;
};

// What is live at the peak that is not a parameter, gradient, optimizer state or buffer, by the op
// that allocated it and its phase ("aten.mm.default@F0").
struct StepHolder {
  std::string label;
  StepCategory category;
  int64_t bytes;
};

// The host's bytes over the step, where FSDP2's CPUOffloadPolicy keeps the sharded parameters, their
// gradients and the optimizer's states there, and the optimizer steps them there (StepBytes' host
// storages): the first maximum of the live host bytes, its phase and split, what is live at the end, and
// of it the pinned tensors' (CPUOffloadPolicy(pin_memory=True): the sharded parameters and the first
// micro-batch's gradient copies), with the blocks the caching host allocator holds for them
// (CachingHostAllocator.h: each request rounded up to a power of two, a freed block kept for a later
// request of its size). Copies: the bytes copied to the host and back to the device, over the step.
struct StepHostAnalysis {
  int64_t peak_bytes = 0;
  std::string peak_phase;  // empty where the host held nothing
  StepSplit peak_split;
  int64_t live_at_end = 0;
  int64_t pinned_peak_bytes = 0;
  int64_t pinned_reserved_bytes = 0;
  int64_t copied_to_host_bytes = 0;
  int64_t copied_to_device_bytes = 0;
};

struct StepAnalysis {
  StepMoment peak;
  StepMoment other_peak;  // `bytes` is the other bytes alone; split.total() the live bytes then
  std::vector<StepPhase> phases;
  std::vector<StepHolder> peak_other_by_op;  // largest first
  int64_t events = 0;
};

// A share of a storage's bytes: bytes * num / den, rounded down.
struct Share {
  int64_t num = 1;
  int64_t den = 1;
  int64_t of(int64_t bytes) const {
    if (num == den) return bytes;
    if (bytes <= std::numeric_limits<int64_t>::max() / num) return bytes * num / den;
    __extension__ using Wide = __int128;  // bytes * num passes 64 bits
    return static_cast<int64_t>(static_cast<Wide>(bytes) * num / den);
  }
  bool identity() const { return num == den; }
  bool operator==(const Share&) const = default;  // the same fraction, written alike
};

// How the composed terms reweigh the simulated step (step/step_compose.h): each category's storages
// counted at a share of their bytes; the optimizer step's temporaries at their own share; and bytes
// added to every moment of a forward or backward pass (ZeRO-3's gathered parameters).
struct StepWeights {
  std::array<Share, static_cast<size_t>(StepCategory::kCount)> by_category{};
  Share optimizer_temporaries;
  int64_t during_passes = 0;

  bool identity() const {
    for (const Share& s : by_category)
      if (!s.identity()) return false;
    return optimizer_temporaries.identity() && during_passes == 0;
  }
};

// A recorded pass: its events [events_from, events_to) and the storages counted meanwhile (slots); the
// bytes it copied between the host and the device, which each replay of it copies again.
struct StepPassLog {
  int64_t events_from = 0, events_to = 0;
  int32_t slots_from = 0, slots_to = 0;
  int64_t copied_to_host = 0, copied_to_device = 0;
};

class StepBytes final : public Observer {
 public:
  // The log's buffers are the thread's last step's, kept (Note [Recycled buffers], util/recycled.h).
  StepBytes()
      : Observer(kOnOp | kOnFree | kOnParameterGrad | kOnResize),
        slot_of_(reused_vector<StepBytes, int32_t>()),
        storages_(reused_vector<StepBytes, StorageInfo>()),
        events_(reused_vector<StepBytes, Event>()),
        segments_(reused_vector<StepBytes, Segment>()) {}
  ~StepBytes() override {
    recycle_vector<StepBytes>(slot_of_);
    recycle_vector<StepBytes>(storages_);
    recycle_vector<StepBytes>(events_);
    recycle_vector<StepBytes>(segments_);
  }
  StepBytes(const StepBytes&) = delete;
  StepBytes& operator=(const StepBytes&) = delete;

  void mark_phase(std::string name);
  // Count `tensor`'s storage from now (if it is not counted already), as allocated by `op`: its own
  // bytes, or `bytes` where the storage PyTorch allocates is larger than the tensor (FSDP2's padding).
  void track(const Tensor& tensor, std::string_view op = "input", int64_t bytes = -1);
  // `tensor`'s storage is (also) of `category`; the strongest category a storage is given wins.
  void note(const Tensor& tensor, StepCategory category);
  // `tensor`'s counted storage now holds `bytes` (UntypedStorage.resize_), an event of the difference
  // named `op`; a storage resized to 0 counts nothing until it is resized again.
  void resize(const Tensor& tensor, int64_t bytes, std::string_view op);
  // `tensor` lives on the host in a CUDA run (AdamW's step counts): counted here as the step oracle
  // counts it, and left out of what the device's allocator sees (step/step_alloc.h).
  void note_off_device(const Tensor& tensor);
  // `tensor`'s storage is never the step's: memory outside PyTorch's allocators (PagedAdamW8bit's
  // unified memory), which no op that reads or writes it makes count.
  void exclude(const Tensor& tensor);
  // Whether the storages made from now on are host tensors (StepHostScope): counted in the host's log
  // (analyse_host), never in the device's. place_on_host: `tensor`'s storage, not yet counted, is one.
  // note_pinned: it is pinned (in the caching host allocator's blocks).
  void set_on_host(bool on_host) { on_host_ = on_host; }
  bool on_host() const { return on_host_; }
  void place_on_host(const Tensor& tensor);
  void note_pinned(const Tensor& tensor);
  // `bytes` copied from the device to the host, or from the host to the device.
  void note_copy(int64_t bytes, bool to_host) { (to_host ? copied_to_host_ : copied_to_device_) += bytes; }
  // The host's side of the step (its storages' categories as analyse() gives the device's).
  StepHostAnalysis analyse_host() const;
  // The stream the storages made from now on are allocated on (StepStream::kCompute until set).
  void set_stream(StepStream stream) { stream_ = stream; }
  StepStream stream() const { return stream_; }
  // `tensor`'s storage, born in the step's first phase, is taken back as if never made: its birth
  // moves no bytes, and it is not counted from now on (a steady step's optimizer state of a parameter
  // that turned out to receive no gradient, which step 1 never gave one).
  void retract(const Tensor& tensor);

  void on_op(const OpCall& call) override;
  void on_free(const Storage& storage) override;
  // A storage born in a folded loop's standing iteration now stands for its alike iterations' bytes
  // too (Note [Alike iterations], ops/dispatch.h; Note [The step folds alike iterations]): an event of
  // the bytes it adds, named by the op that made it.
  void on_resize(const Storage& storage, int64_t old_nbytes) override;
  void on_parameter_grad(const Tensor& grad) override {
    if (parameter_grads_in_flight_) note(grad, StepCategory::kParamGradInflight);
  }
  // Whether a gradient handed to one of the engine's leaves is the model's parameter's (not where FSDP2's
  // unsharded parameters are the leaves: the model's parameters, its shards, receive none in backward).
  void count_parameter_grads(bool counted) { parameter_grads_in_flight_ = counted; }

  // Start and end recording a pass.
  StepPassLog begin_pass() const;
  void end_pass(StepPassLog& log) const;
  // Whether a replay of `pass` stands for the pass: every storage it frees it made, or (a backward)
  // `forward` made; a storage made before it (FSDP2's unsharded parameters) it may only resize. A pass
  // that frees another storage (one some other pass made) cannot be replayed.
  bool replays(const StepPassLog& pass, const StepPassLog* forward) const;
  // Replay `pass` (checked by replays()) in the current phase: its events logged again, each storage
  // it made made anew; `forward` is the replay whose storages it frees (a backward's), or -1. Returns
  // the replay's id.
  int64_t replay(const StepPassLog& pass, int64_t forward = -1);

  int64_t live_bytes() const { return live_; }
  // Whether the live bytes passed kLargestStepBytes at some event (then the log's sums mean nothing).
  bool too_large() const { return too_large_; }
  bool is_live(const Tensor& tensor) const;
  // `holders`: also what is live at the peak by op (peak_other_by_op), a walk of the log up to it.
  StepAnalysis analyse(const StepWeights& weights = {}, bool holders = true) const;
  // Whether the phase `name` is a forward or backward pass ("F3", "B0.1"): where during_passes counts.
  static bool is_pass_phase(std::string_view name);
  // For each of `weights`, the highest of the phases' peaks analyse() would find under it (the first
  // where two are equal), all in one walk of the log: what a planner reweighing one step for several
  // compositions reads of each.
  std::vector<StepMoment> highest_phase_peaks(std::span<const StepWeights> weights) const;

 private:
  friend class StepWalk;  // every event in order, replays expanded (step/step_walk.h)
  struct Event {
    int32_t slot;
    bool resize = false;  // a resize of a live storage, not its birth or death
    int64_t delta_bytes;
    std::string_view op;  // the allocating op; "free" for a death
  };
  struct StorageInfo {
    int64_t live_bytes = 0;  // while tracked and live
    StepCategory category = StepCategory::kActivations;
    std::string_view op;
    int32_t phase = 0;
    bool off_device = false;
    bool excluded = false;  // exclude(): never tracked
    bool host = false;      // a host tensor: its events in host_events_
    bool pinned = false;
    StepStream stream = StepStream::kCompute;
  };
  // A run of the log: events the engine's storages made (stored in events_ from `from`), or a replay
  // of a recorded pass (its events events_[from, from + length), its storages made anew).
  struct Segment {
    int64_t start = 0;   // its first event's index in the log
    int64_t length = 0;
    int64_t from = 0;
    bool replayed = false;
    int32_t phase = 0;                   // a replay's phase: its storages are born there
    int32_t slots_from = 0, slots_to = 0;  // a replay: the recorded pass's storages
    int64_t forward = -1;                // a replayed backward: the replayed forward's segment
  };
  // What a replayed pass does to the live bytes under some weights: the net change, and the highest
  // point of the total and of the other bytes it reaches, at its first event reaching it.
  struct Excursion {
    StepSplit net;
    int64_t top = 0, top_at = -1;
    StepSplit at_top;
    int64_t other_top = 0, other_top_at = -1;
    StepSplit at_other_top;
    // What its events weigh by: the categories of its storages (a bit each) and whether any is an
    // optimizer step's temporary. Two weightings that share these shares give it the same excursion.
    uint32_t categories = 0;
    bool temporaries = false;
  };
  // A replayed segment's excursion under `weights` (the recorded pass it replays, walked once).
  Excursion excursion_of(const Segment& seg, const StepWeights& weights) const;
  int32_t slot(int64_t storage_id);  // made on first sight
  int32_t find_slot(int64_t storage_id) const;  // -1 where never seen
  void log(int32_t slot, int64_t delta_bytes, std::string_view op, bool resize = false);
  void add_live(int64_t delta_bytes);
  // The storages live after event `peak_event`: bytes, category, allocating op and phase of each.
  struct Live {
    int64_t bytes;
    StepCategory category;
    std::string_view op;
    int32_t phase;
  };
  std::vector<Live> live_after(int64_t event) const;
  // Each replay segment's first storage key (past every slot; -1 for the engine's segments), and the
  // number of keys in all.
  std::vector<int64_t> replay_key_bases(int64_t& keys) const;
  // How the events of one segment name their storages' keys: a replay's own storages from its first
  // key on, a replayed backward's storages of its forward from the forward's, any other storage (and a
  // replay's resize of a storage made before its pass: FSDP2's unsharded parameters) by its slot.
  // Worked out once a segment, as a walk over every event reads it at each.
  struct SegmentKeys {
    bool replayed = false;
    int32_t slots_from = 0, slots_to = 0;  // the replay's own storages
    int64_t own_base = 0;                  // an own slot's key, less the slot
    int64_t forward_base = 0;              // a storage of the replayed forward's: its key, less its slot
    int64_t of(const Event& e) const {
      const bool own = e.slot >= slots_from && e.slot < slots_to;
      if (!replayed || (e.resize && !own)) return e.slot;
      return (own ? own_base : forward_base) + e.slot;
    }
  };
  SegmentKeys segment_keys(const std::vector<int64_t>& key_base, size_t i) const;
  // The key of the storage event `e` of segment `i` is about.
  int64_t storage_key(const std::vector<int64_t>& key_base, size_t i, const Event& e) const {
    return segment_keys(key_base, i).of(e);
  }
  // The bytes event `e` moves under `weights`: its storage's share; a storage's death moves what its
  // birth did. A replayed storage is of its recorded storage's category and, like it, of a pass.
  // (Inline: analyse() and the allocator's walk ask it per event.)
  // Whether a storage is one the optimizer's step made for its update (StepWeights::optimizer_temporaries).
  bool optimizer_temporary(const StorageInfo& s) const {
    return s.category == StepCategory::kActivations && s.phase >= 0 && is_optimizer_step_[static_cast<size_t>(s.phase)];
  }
  int64_t weighted(const Event& e, const StepWeights& weights) const {
    const StorageInfo& s = storages_[static_cast<size_t>(e.slot)];
    const Share share = optimizer_temporary(s) ? weights.optimizer_temporaries
                                               : weights.by_category[static_cast<size_t>(s.category)];
    const int64_t bytes = share.of(e.delta_bytes > 0 ? e.delta_bytes : -e.delta_bytes);
    return e.delta_bytes > 0 ? bytes : -bytes;
  }

  // A host storage's birth, resize or death, in the phase it happened.
  struct HostEvent {
    int32_t slot;
    int32_t phase;
    int64_t delta_bytes;
  };
  void log_host(int32_t slot, int64_t delta_bytes);
  std::vector<HostEvent> host_events_;
  int64_t host_live_ = 0;
  bool on_host_ = false;
  int64_t copied_to_host_ = 0, copied_to_device_ = 0;  // replays included

  LargeVector<int32_t> slot_of_;  // by the engine's storage id: its slot + 1 (0: none yet)
  LargeVector<StorageInfo> storages_;  // by slot
  LargeVector<Event> events_;
  LargeVector<Segment> segments_;
  int64_t events_logged_ = 0;  // replays included
  std::vector<std::pair<std::string, int64_t>> phases_;  // name, first event
  std::vector<bool> is_optimizer_step_;  // by phase: whether it is the optimizer's (weighted() asks per event)
  // Each replayed pass, by its first event: its net change of the live bytes, its highest point above its
  // start, and its resizes of storages made before it (StepBytes::replay).
  struct ReplayedPass {
    int64_t net = 0, top = 0;
    bool overflows = false;
    std::vector<int64_t> resizes;
  };
  std::map<int64_t, ReplayedPass> replayed_;
  int64_t live_ = 0;
  bool parameter_grads_in_flight_ = true;
  bool too_large_ = false;
  StepStream stream_ = StepStream::kCompute;
};

std::string_view step_category_name(StepCategory category);

// The storages made within its scope host tensors (FSDP2's copies of gradients to the host, an optimizer
// stepping host parameters).
class StepHostScope {
 public:
  StepHostScope(StepBytes& bytes, bool on_host = true) : bytes_(bytes), previous_(bytes.on_host()) {
    bytes_.set_on_host(on_host || previous_);
  }
  ~StepHostScope() { bytes_.set_on_host(previous_); }
  StepHostScope(const StepHostScope&) = delete;
  StepHostScope& operator=(const StepHostScope&) = delete;

 private:
  StepBytes& bytes_;
  bool previous_;
};

// The storages made within its scope allocated on `stream` (with torch.cuda.stream(...)).
class StepStreamScope {
 public:
  StepStreamScope(StepBytes& bytes, StepStream stream) : bytes_(bytes), previous_(bytes.stream()) {
    bytes_.set_stream(stream);
  }
  ~StepStreamScope() { bytes_.set_stream(previous_); }
  StepStreamScope(const StepStreamScope&) = delete;
  StepStreamScope& operator=(const StepStreamScope&) = delete;

 private:
  StepBytes& bytes_;
  StepStream previous_;
};

}  // namespace census
