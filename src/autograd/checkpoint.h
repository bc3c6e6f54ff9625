// File: checkpoint.h
// Non-reentrant activation checkpointing with a selective policy, as torch.utils.checkpoint runs it
// with create_selective_checkpoint_contexts (Note [Selective checkpoint policy]).
//
// Forward: the region's input is kept (_NoopSaveInputs); every tensor a node in the region would save
// is replaced by a holder (the region's saved-tensor hooks); the outputs of the ops the policy saves
// are cached (the region's dispatch mode). Backward: the first unpack of a holder re-runs the region's
// forward, where the saved ops' outputs come from the cache and every tensor a node saves is kept for
// its holder (and by that node of the re-run's own graph, alive while a tensor it made is), stopping right after the last save the forward made (early stop: the rest of the
// forward runs for its shapes only, with grad mode off, unseen by observers, as if it had not run).
// Each holder's tensor then goes to the node that unpacks it.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string_view>
#include <vector>

#include "graph/saved_variable.h"
#include "ops/dispatch.h"
#include "ops/op_def.h"
#include "tensor/tensor.h"

namespace census {

// How a decoder layer is checkpointed: each a policy real runs use.
enum class Recompute : uint8_t {
  kNone,
  kSelective,      // non-reentrant, HyperParallel's selective policy (SelectivePolicy::Kind::kHyperParallel)
  kFull,           // non-reentrant, no policy: checkpoint(use_reentrant=False), the HF Trainer's default
  kFullReentrant,  // checkpoint(use_reentrant=True): torch.utils.checkpoint's CheckpointFunction
  kTorchtitanOp,   // non-reentrant, torchtitan's per-op policy (SelectivePolicy::Kind::kTorchtitanOp)
};

// A selective policy, per region and per phase (forward, recompute):
//   kHyperParallel  by each op's catalogue class (SacClass): mm and _grouped_mm counted together, the
//                   1st, 3rd, ... saved; addmm, bmm, the convolution and the attention kernels saved
//   kTorchtitanOp   torchtitan's `_save_list` at commit 9dec370 (parallelize_llama.py, December 2024):
//                   aten.mm counted alone, the 1st, 3rd, ... saved; the attention kernel (SDPA's flash and
//                   efficient kernels: here the census's flash contracts) and reduce_scatter_tensor saved;
//                   abs and max (float8's amax) saved, none of which a bf16 layer runs; every other op
//                   recomputed
class SelectivePolicy {
 public:
  enum class Kind : uint8_t { kHyperParallel, kTorchtitanOp };
  explicit SelectivePolicy(Kind kind = Kind::kHyperParallel) : kind_(kind) {}
  bool saves(Op op, bool recompute);

 private:
  Kind kind_;
  std::array<int64_t, 2> alternating_{};  // the counted matmuls so far, forward and recompute
};

// What a region's forward cached, for `census explain --selective`.
struct CachedOutput {
  std::string_view aten_op;
  std::string_view module;
  Dims shape;
  DType dtype;
  int64_t bytes;
  bool first_output;  // an op's outputs are logged one by one; the first stands for the call
};

// A checkpointed region: the dispatch mode and the saved-tensor hooks in force while its forward or
// its recompute runs.
class CheckpointFrame final : public DispatchMode, public SavedTensorHooks, public CycleHolder {
 public:
  enum class Phase : uint8_t { kForward, kRecompute };

  // The frame's recompute closure can hold what holds the frame (Gemma 4's carry of shared keys and
  // values, read by later layers' graphs): it registers with the session that runs it
  // (Note [Cycles no backward breaks]).
  CheckpointFrame() : session_(&Session::current()) { session_->hold_cycle(this); }
  ~CheckpointFrame() override {
    if (session_ != nullptr) session_->forget_cycle(this);
  }
  CheckpointFrame(const CheckpointFrame&) = delete;
  CheckpointFrame& operator=(const CheckpointFrame&) = delete;
  void release_cycle() override;

  ModeDecision decide(const OpDef& def, std::span<const Tensor> inputs, std::span<Tensor> outputs) override;
  void ran(const OpCall& call) override;
  Packed pack(const Tensor& tensor, Ref<SavedTensorHooks>& owner, int64_t& slot) override;
  Tensor unpack(int64_t slot) override;
  void release(int64_t slot) override;

  // Run `forward` (the region's forward, or its recompute) with this frame's mode and hooks in force.
  template <class Forward>
  auto run(Forward&& forward) -> decltype(forward());

  std::function<void()> recompute_fn;  // re-runs the region's forward, its output dropped
  std::vector<Tensor> inputs;          // kept by _NoopSaveInputs until the frame dies
  // An input the hooks in force packed instead (activation offloading, autograd/offload_activations.h):
  // its place in `inputs` stays empty until the recompute unpacks it (ctx.saved_tensors), and is
  // emptied again once the recompute has run.
  struct PackedInput {
    size_t index;
    Ref<SavedTensorHooks> hooks;
    int64_t slot;
    Ref<Node> grad_fn;  // the saved tensor's history, which the unpacked one takes (SavedVariable's grad_fn_)
    uint32_t output_nr = 0;
    // A leaf that requires grad: its AccumulateGrad, which the unpacked one accumulates into
    // (SavedVariable's grad_accumulator_), as the leaf itself would.
    Ref<Node> grad_accumulator;
  };
  std::vector<PackedInput> packed_inputs;
  std::vector<CachedOutput>* cached_log = nullptr;
  // False under full checkpointing (no policy): nothing is cached, every save is recomputed.
  bool selective = true;
  SelectivePolicy policy;
  // Whether the region's forward ran under autocast: its recompute re-enters it (_get_autocast_kwargs),
  // a region of its own whose casts are made again and cached until the recompute ends.
  bool autocast = false;

 private:
  // Run the recompute (at the first unpack of a holder).
  void recompute();
  void stop_recomputation();

  Session* session_;     // the session it is registered with; null once released
  int64_t holders_ = 0;  // saves the forward packed
  // By holder: whether its SavedVariable has gone (its node ran, or the forward dropped its graph).
  // The checkpoint keeps its holders weakly: the recompute stores no tensor for a holder gone.
  std::vector<uint8_t> holder_gone_;
  std::vector<Tensor> recomputed_;  // by holder, filled by the recompute
  int64_t recomputed_count_ = 0;
  bool recomputed_done_ = false;
  bool stopped_ = false;  // the recompute has packed all it needs
  Phase phase_ = Phase::kForward;
  std::map<Op, std::vector<std::vector<Tensor>>> cache_;  // outputs of saved ops, in call order
  std::map<Op, size_t> cache_next_;                        // the next entry the recompute pops
};

// Run `forward(input)` as a checkpointed region under the selective policy; its output.
// `cached_log` takes every output the forward cached.
Tensor checkpoint(const std::function<Tensor(const Tensor&)>& forward, const Tensor& input,
                  std::vector<CachedOutput>* cached_log = nullptr);

// Run `forward(input)` as a checkpointed region with no policy (torch.utils.checkpoint.checkpoint with
// use_reentrant=False and no context_fn): every tensor the region saves is recomputed in the backward.
Tensor checkpoint_full(const std::function<Tensor(const Tensor&)>& forward, const Tensor& input);

// The same over several inputs and outputs: checkpoint(fn, *inputs, use_reentrant=False), every tensor
// input kept by _NoopSaveInputs, in order (TRL's chunked loss: a chunk of hidden states, the head's
// weight, the chunk's labels).
using RegionForward = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
std::vector<Tensor> checkpoint_full(const RegionForward& forward, const std::vector<Tensor>& inputs);

// Run `forward(input)` under torchtitan's per-op policy (SelectivePolicy::Kind::kTorchtitanOp).
Tensor checkpoint_torchtitan_op(const std::function<Tensor(const Tensor&)>& forward, const Tensor& input);

// Run `forward(input)` as torch.utils.checkpoint.checkpoint(use_reentrant=True) runs it: CheckpointFunction's
// forward under no_grad (nothing saved, its temporaries freed as it goes) saving its input; its backward
// detaches the input into a leaf, runs the forward again with grad, and a backward of its own over that
// graph (the layer's parameters get their gradients there), the leaf's .grad its gradient (Note [Reentrant
// checkpointing], checkpoint.cpp).
Tensor checkpoint_reentrant(const std::function<Tensor(const Tensor&)>& forward, const Tensor& input);

// Run `forward(input)` under `mode`.
Tensor checkpointed(Recompute mode, const std::function<Tensor(const Tensor&)>& forward, const Tensor& input);

template <class Forward>
auto CheckpointFrame::run(Forward&& forward) -> decltype(forward()) {
  Session& session = Session::current();
  DispatchMode* previous_mode = session.set_mode(this);
  SavedTensorHooks* previous_hooks = GraphContext::current().set_hooks(this);
  struct Restore {
    Session& session;
    DispatchMode* mode;
    SavedTensorHooks* hooks;
    ~Restore() {
      session.set_mode(mode);
      GraphContext::current().set_hooks(hooks);
    }
  } restore{session, previous_mode, previous_hooks};
  return forward();
}

}  // namespace census
