// File: checkpoint.h
// Non-reentrant activation checkpointing with a selective policy, as torch.utils.checkpoint runs it
// with create_selective_checkpoint_contexts (Note [Selective checkpointing]).
//
// Forward: the region's input is kept (_NoopSaveInputs); every tensor a node in the region would save
// is replaced by a holder; the outputs of the ops the policy saves are cached. Backward: the first
// unpack of a holder re-runs the region's forward, where the saved ops' outputs come from the cache
// and every tensor a node saves is kept for its holder, stopping right after the last save the
// forward made (early stop). Each holder's tensor then goes to the node that unpacks it.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string_view>
#include <vector>

#include "ops/op_def.h"
#include "tensor/tensor.h"

namespace census {

// HyperParallel's selective policy, per region and per phase (forward, recompute): the projections
// without bias (mm) and the grouped experts' matmuls (_grouped_mm) alternate, counted together, the
// 1st, 3rd, ... saved; biased projections (addmm), batched matmuls (bmm), the convolution and the
// attention kernels always saved; everything else recomputed.
class SelectivePolicy {
 public:
  bool saves(Op op, bool recompute);

 private:
  std::array<int64_t, 2> matmuls_{};  // mm and _grouped_mm calls so far, forward and recompute
};

// What the forward's saved matmuls and recomputed ones cost, by part: the recompute shares.
struct RecomputeLedger {
  std::array<int64_t, 2> attention_flops{};  // [saved, recomputed]
  std::array<int64_t, 2> rest_flops{};
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

class CheckpointFrame {
 public:
  enum class Phase : uint8_t { kForward, kRecompute };

  std::function<void()> recompute_fn;  // re-runs the region's forward, its output dropped
  Tensor input;                        // kept by _NoopSaveInputs until the frame dies
  int64_t holders = 0;                 // saves the forward packed
  // By holder: whether its SavedVariable has gone (its node ran, or the forward dropped its graph).
  // The checkpoint keeps its holders weakly: the recompute stores no tensor for a holder gone.
  std::vector<uint8_t> holder_gone;
  std::vector<Tensor> recomputed;      // by holder, filled by the recompute
  int64_t recomputed_count = 0;
  bool recomputed_done = false;
  Phase phase = Phase::kForward;
  // False under full checkpointing (no policy): nothing is cached, every save is recomputed.
  bool selective = true;
  SelectivePolicy policy;
  std::map<Op, std::vector<std::vector<Tensor>>> cache;  // outputs of saved ops, in call order
  std::map<Op, size_t> cache_next;                        // the next entry the recompute pops
  RecomputeLedger* ledger = nullptr;
  std::vector<CachedOutput>* cached_log = nullptr;
  const std::vector<int64_t>* attention_parameters = nullptr;  // storage ids, for the ledger

  // Run the recompute (at the first unpack of a holder).
  void recompute();
};

// Thrown by the recompute's pack hook once it has packed as many tensors as the forward did.
struct StopRecomputation {};

// Run `forward(input)` as a checkpointed region under the selective policy; its output.
// `ledger` (with the attention's parameter storages) takes the forward's matmul FLOPs by part and
// decision; `cached_log` every output the forward cached.
Tensor checkpoint(const std::function<Tensor(const Tensor&)>& forward, const Tensor& input,
                  RecomputeLedger* ledger = nullptr, const std::vector<int64_t>* attention_parameters = nullptr,
                  std::vector<CachedOutput>* cached_log = nullptr);

// Run `forward(input)` as a checkpointed region with no policy (torch.utils.checkpoint.checkpoint with
// use_reentrant=False and no context_fn): every tensor the region saves is recomputed in the backward.
Tensor checkpoint_full(const std::function<Tensor(const Tensor&)>& forward, const Tensor& input);

}  // namespace census
