// File: step_compose.h
// What one process cannot run, composed term by term onto the simulated step of one rank:
//
//   data parallelism D with ZeRO (Megatron's distributed optimizer, DeepSpeed's stages), sharded over
//   D x C ranks under context parallelism C (every rank holding the same parameters; HyperParallel's
//   shard_p_os_non_exp = d x cp x t, its t the simulated TP):
//     ZeRO-1  optimizer states / D
//     ZeRO-2  and gradients / D
//     ZeRO-3  and parameters / D, plus the gathered whole parameters of the layer being computed and
//             of the one prefetched (2 x the largest layer's parameter bytes) during every pass
//   fp32 master weights   the optimizer holds an fp32 copy and fp32 moments: 12 B per parameter for the
//                         simulated bf16 moments' 4 (states x 3), and its update's temporaries in fp32 (x 2)
//   fp32 gradients        Megatron's main_grad: 4 B per parameter for 2 (gradients x 2)
//   context parallelism C the rank's share of each sequence (S / C tokens) is simulated; composed, the
//                         K/V its ring attention receives for the layer computing: the other C - 1
//                         shards' keys and values, (C - 1) (S / C) x b x 2 x KV heads (the rank's) x head_dim
//                         x 2 B, during every pass (HyperParallel's gathered K/V in the working set;
//                         not in what a layer keeps: a ring's attention saves its own shard's K/V and
//                         passes the others round again in the backward)
//   what no census sees   the CUDA context, NCCL's communicator buffers, allocator fragmentation: bytes the
//                         user states (default 0), each its own line, added to the peak
//
// Each storage of the simulated step is counted at its category's share (step/step_bytes.h), and the
// peak is found again over the reweighed event log, so a term that shrinks one category can move the
// peak to another phase. Tensor parallelism is not composed: the step builds the rank's layers as
// tp_config holds them (heads and widths divided).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "step/step_bytes.h"

namespace census {

// The largest byte figure a user states (a device's memory, an overhead): 2^60 B, an exbibyte, far
// past any device: a sum of four such figures stays exact in 64 bits, with room for a step's peak.
inline constexpr int64_t kLargestBytes = int64_t{1} << 60;

struct StepComposition {
  int64_t data_parallel = 1;
  int zero = 0;  // 0 (plain data parallelism), 1, 2, 3
  bool fp32_master_weights = false;
  bool fp32_gradients = false;
  int64_t largest_layer_parameter_bytes = 0;  // ZeRO-3's gathered unit (set by the step)
  int64_t context_parallel = 1;  // set by the step from its options
  int64_t ring_kv_bytes = 0;     // the K/V a ring attention receives for one layer (set by the step)
  int64_t cuda_context = 0;
  int64_t nccl_buffers = 0;
  int64_t fragmentation = 0;

  bool composes() const { return zero > 0 || fp32_master_weights || fp32_gradients || context_parallel > 1; }
};

// A composed term, as --explain prints it.
struct ComposedTerm {
  std::string name;
  std::string formula;
  int64_t bytes;
};

StepWeights step_weights(const StepComposition& composition);

// The terms at the composed peak, each category's bytes there with the formula that made them, then
// the user's overhead terms.
std::vector<ComposedTerm> composed_terms(const StepComposition& composition, const StepMoment& composed_peak);

// The user's overheads, summed.
inline int64_t overhead_bytes(const StepComposition& c) { return c.cuda_context + c.nccl_buffers + c.fragmentation; }

}  // namespace census
