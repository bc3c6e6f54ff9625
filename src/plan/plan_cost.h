// File: plan_cost.h
// The step-time estimate `census plan` ranks layouts by. It is an estimate, every term by name, built
// from the census's own counts and a device's datasheet figures (plan/plan_device.h):
//
//   a part's forward     max(FLOPs / (peak x efficiency), bytes moved / HBM bandwidth): the layer
//                        census's FLOPs and traffic by part (census_flops, census_traffic) at the
//                        rank's TP, each part compute- or memory-bound, whichever is slower
//   context parallelism  C: the layer census at the rank's S / C tokens, its attention kernel (the
//                        "scores" part) C times over: under the causal mask a load-balanced ring's
//                        S / C queries meet S² / 2C (query, key) pairs, C x the shard's own (S/C)² / 2
//   a layer's backward   2 x its forward (the gradients of the inputs and of the weights)
//   recompute            full: one more forward; selective: the share of matmul FLOPs the policy
//                        leaves to the backward (census_recomputed) of the attention projections' and
//                        of the rest's matmul time, the weightless parts' time whole, the attention
//                        kernel not re-run (the policy saves its outputs)
//   the output layer     the final norm, LM head and loss counted the same way (last stage), and 2 x
//                        for their backward
//   TP                   per layer 2 all-reduces of the hidden state in the forward and 2 in the
//                        backward (no sequence parallelism), ring: 2 (T-1)/T x bytes / bandwidth
//   CP                   per layer the ring's K/V: the forward receives the other C - 1 shards'
//                        (C-1) x S/C x 2 x KV heads x head_dim x 2 B; the backward passes them round
//                        again with their gradients (2 x); full recompute once more: 3 (4) x / bandwidth
//   EP                   per MoE layer 4 all-to-alls (dispatch and combine, forward and backward; 6
//                        under full recompute) of the rank's S/C x top-k x hidden x 2 B, (E-1)/E of
//                        it leaving the rank
//   PP                   per micro-batch, a stage sends its hidden state on and its input gradient
//                        back: 2 x S x hidden x 2 B / bandwidth (x V chunks when interleaved)
//   bubble               1F1B and GPipe: (P - 1) micro-batch times; interleaved: (P - 1) / V
//   DP                   the step's gradient reduction over DP x CP ranks (an expert's over
//                        DP x CP / EP, its expert-data-parallel group), not overlapped: ZeRO-0 all-reduce
//                        2 (D-1)/D x gradient bytes; ZeRO-1/2 reduce-scatter of the gradients and
//                        all-gather of the updated parameters, (D-1)/D each; ZeRO-3 also the forward's
//                        and backward's all-gather of the parameters on every micro-batch
//   optimizer step       memory-bound: parameters read and written, gradients read, states read and
//                        written, at the rank's shares
// A group's bandwidth is the scale-up link where the group lies inside a node, else the NIC's. Ranks
// are placed TP innermost, then CP, then DP, then PP (Megatron's tp-cp-ep-dp-pp: an EP group spans
// TP x EP consecutive ranks).
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

// Layer `layer_index` of `rank_config` (a TP rank's config) on one sequence of `seq_length` tokens
// (the rank's share, S / C, under context parallelism C: its attention kernel counted C times).
ForwardTime layer_forward_time(const ModelConfig& rank_config, int64_t layer_index, int64_t seq_length,
                               const Throughput& device, int64_t context_parallel = 1);
// The final norm, the LM head and the causal-LM loss on one sequence.
ForwardTime output_forward_time(const ModelConfig& config, int64_t seq_length, const Throughput& device);

// Ring collectives over `ranks` at `bytes_per_s`: all-reduce moves 2 (n-1)/n of the bytes each way,
// reduce-scatter and all-gather (n-1)/n.
double all_reduce_seconds(int64_t bytes, int64_t ranks, double bytes_per_s);
double all_gather_seconds(int64_t bytes, int64_t ranks, double bytes_per_s);
// An all-to-all of a rank's `bytes` over `ranks`: (n-1)/n of them leave it.
double all_to_all_seconds(int64_t bytes, int64_t ranks, double bytes_per_s);

}  // namespace census
