// File: plan_cost.h
// The step-time estimate `census plan` ranks layouts by. It is an estimate, every term by name, built
// from the census's own counts and a device's datasheet figures (census/plan_device.h):
//
//   a part's forward     max(FLOPs / (peak x efficiency), bytes moved / HBM bandwidth): the layer
//                        census's FLOPs and traffic by part (census_flops, census_traffic) at the
//                        rank's TP, each part compute- or memory-bound, whichever is slower
//   a layer's backward   2 x its forward (the gradients of the inputs and of the weights)
//   recompute            full: one more forward; selective: the share of matmul FLOPs the policy
//                        leaves to the backward (census_recomputed) of the attention projections' and
//                        of the rest's matmul time, the weightless parts' time whole, the attention
//                        kernel not re-run (the policy saves its outputs)
//   the output layer     the final norm, LM head and loss counted the same way (last stage), and 2 x
//                        for their backward
//   TP                   per layer 2 all-reduces of the hidden state in the forward and 2 in the
//                        backward (no sequence parallelism), ring: 2 (T-1)/T x bytes / bandwidth
//   PP                   per micro-batch, a stage sends its hidden state on and its input gradient
//                        back: 2 x S x hidden x 2 B / bandwidth (x V chunks when interleaved)
//   bubble               1F1B and GPipe: (P - 1) micro-batch times; interleaved: (P - 1) / V
//   DP                   the step's gradient reduction, not overlapped: ZeRO-0 all-reduce
//                        2 (D-1)/D x gradient bytes; ZeRO-1/2 reduce-scatter of the gradients and
//                        all-gather of the updated parameters, (D-1)/D each; ZeRO-3 also the forward's
//                        and backward's all-gather of the parameters on every micro-batch
//   optimizer step       memory-bound: parameters read and written, gradients read, states read and
//                        written, at the rank's shares
// A group's bandwidth is the scale-up link where the group lies inside a node, else the NIC's. Ranks
// are placed TP innermost, then DP, then PP (Megatron's order with CP and EP of 1).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/config.h"

namespace census {

struct Throughput {
  double flops_per_s = 0;  // peak x efficiency
  double hbm_bytes_per_s = 0;
};

struct PartTime {
  std::string part;
  int64_t flops = 0;
  int64_t bytes = 0;
  double seconds = 0;
  bool compute_bound = false;
};

// One forward of one layer (or of the output layer) on one sequence, by part.
struct ForwardTime {
  std::vector<PartTime> parts;
  double seconds = 0;
  double selective_recompute_seconds = 0;  // what the selective backward runs again
};

// Layer `layer_index` of `rank_config` (a TP rank's config) on one sequence of `seq_length`.
ForwardTime layer_forward_time(const ModelConfig& rank_config, int64_t layer_index, int64_t seq_length,
                               const Throughput& device);
// The final norm, the LM head and the causal-LM loss on one sequence.
ForwardTime output_forward_time(const ModelConfig& config, int64_t seq_length, const Throughput& device);

// Ring collectives over `ranks` at `bytes_per_s`: all-reduce moves 2 (n-1)/n of the bytes each way,
// reduce-scatter and all-gather (n-1)/n.
double all_reduce_seconds(int64_t bytes, int64_t ranks, double bytes_per_s);
double all_gather_seconds(int64_t bytes, int64_t ranks, double bytes_per_s);

}  // namespace census
