// File: plan_cost.h
// The compute and the collectives `census plan`'s time estimate is made of (plan/plan_time.h), each op
// and each message priced against a device's figures and calibration (plan/plan_device.h):
//
//   a GEMM               (F / fill + W½) / (peak x gemm_efficiency), or its bytes / (HBM x memory
//                        efficiency) where that is longer: a roofline whose compute side saturates, a GEMM
//                        of F FLOPs reaching gemm_efficiency x F / (F + W½) of the peak (W½ =
//                        gemm_half_gflop). A grouped GEMM (the experts') pays for whole 128-row tiles:
//                        fill = its rows per group / the tiles' rows
//   the attention kernel its FLOPs under the causal mask (half the (query, key) pairs the op's shapes
//                        span) at attention_forward_efficiency; its backward 2.5 x those FLOPs (the flash
//                        backward's five matmuls to the forward's two) at attention_backward_efficiency
//   any other op         memory-bound: the bytes it reads and writes / (HBM x memory_efficiency)
//   every kernel         at least kernel_floor_us
//   a backward           a GEMM's GEMMs of its FLOPs, one per matrix operand that requires grad (the
//                        input's and the weight's gradients; a frozen weight's GEMM the input's alone, a
//                        GEMM of no differentiable operand none), a memory-bound op's bytes twice over (it
//                        reads the gradient and what it saved, writes the input's gradient)
// The ops are the layer census's own (a rank's layer at its TP, EP and tokens), recorded once for one
// sequence: a micro-batch of b sequences multiplies every op's FLOPs and activation bytes by b (every
// op works per token or per sequence), not the parameters it reads.
//
// Collectives, over n ranks at a link's bandwidth x efficiency, with a per-message latency α:
//   all-reduce      min(ring 2 (n-1) α, tree 2 log2(n) α) + 2 (n-1)/n x bytes / bandwidth
//   all-gather,     (n-1) α + (n-1)/n x bytes / bandwidth (bytes: the whole gathered tensor)
//   reduce-scatter
//   all-to-all      α + the bytes to peers inside the node / the link's bandwidth, or those to peers in
//                   other nodes / the NIC's, whichever is longer (they move at once)
//   send/receive    α + bytes / bandwidth
// A group lies inside a node where all its ranks do, else its traffic crosses the NIC.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "census/selective_census.h"
#include "models/config.h"
#include "plan/plan_device.h"
#include "step/recompute_choice.h"
#include "step/step_options.h"

namespace census {

// The device's rates a cost is priced at (plan/plan_device.h, with any figure the planner replaced).
struct Rates {
  double flops_per_s = 0;      // the peak
  double hbm_bytes_per_s = 0;  // the datasheet's
  Calibration calibration;
  static Rates of(const Device& device);
};

enum class OpClass : uint8_t { kGemm, kAttention, kMemory };

// One op of a recorded forward, for one sequence.
struct OpRecord {
  OpClass cls = OpClass::kMemory;
  bool attention_part = false;  // an attention projection (for the selective policy's share)
  int64_t flops = 0;            // the catalogue's (the attention kernel's over every (query, key) pair)
  int64_t bytes = 0;            // read and written
  int64_t parameter_bytes = 0;  // of them, parameters read (not multiplied by the micro-batch)
  int64_t groups = 1;           // a grouped GEMM's groups
  int64_t rows = 0;             // a grouped GEMM's rows (all groups')
  int64_t count = 1;            // how many times it runs (a folded loop's weight)
  // A GEMM's backward GEMMs: one for each matrix operand that requires grad (a frozen weight's GEMM
  // makes its input's gradient alone; Note [A fine-tuned layer's record]).
  int64_t backward_gemms = 2;
  bool backward = true;  // an op whose backward runs (a frozen embedding's lookup has none)
};

// A layer's forward as recorded, and what the time model reads off it.
struct LayerOps {
  std::vector<OpRecord> ops;
  RecomputeShares shares;        // the selective policy's recomputed matmul shares
  bool attention_kernel = false; // runs the attention kernel (a ring attention under CP)
  int64_t parameters = 0;        // the rank's parameters in the layer, as its step builds them
  int64_t expert_parameters = 0; // of them, the routed experts'
  int64_t untrained_parameters = 0;  // of the others, those no gradient reaches (Note [Parameters no gradient reaches])
};

// Layer `layer_index` of `rank_config` (a TP rank's config, its experts' EP share set) on one sequence
// of `tokens` tokens; `shares` its selective recompute shares (census_recomputed). Under DTensor's plan
// with sequence parallelism over `sequence_shards` ranks (the TP degree), as the step runs the layer:
// its norms and residual adds on the rank's tokens / T, its attention and MLP on the all-gathered
// sequence; the plan's collectives are left out of the record (the time model prices them apart).
//
// `tuned`: the step options whose fine-tuning (their lora, quantize, autocast and load_dtype) the layer is
// built and run under, as census step builds and runs it (Note [A fine-tuned layer's record]); a default
// StepOptions for none. The record_* functions below take it alike.
LayerOps record_layer(const ModelConfig& rank_config, int64_t layer_index, int64_t tokens, const RecomputeShares& shares,
                      int64_t sequence_shards = 1, const StepOptions& tuned = {});
// Every decoder layer of the model as its forward runs it (models/causal_lm.h: the model built whole from
// `config`, its layers from `rank_config`), on one sequence of `tokens` tokens: each layer's ops as
// record_layer records a lone one, what the model computes around the layers left out as record_layer
// leaves it out; `shares` by layer (census_stack_recomputed). The record of a layer that cannot run
// alone (Family::stack_only); where a layer can, it equals record_layer's (tests/plan/plan_cost_test.cpp).
// Where the family's layers are alike by kind (Family::stack_layers_alike_by_kind), the forward runs
// only as far as each kind's first layer and every later layer takes its kind's record, its own shares
// (tests/plan/plan_stack_cost_test.cpp holds that equal to the whole forward's); `whole` runs every
// layer all the same. `sequence_shards` as record_layer's.
std::vector<LayerOps> record_stack(const ModelConfig& config, const ModelConfig& rank_config, int64_t tokens,
                                   const std::vector<RecomputeShares>& shares, bool whole = false,
                                   int64_t sequence_shards = 1, const StepOptions& tuned = {});
// record_stack's records but not their copies: a layer read as an earlier one (`read_as`, from
// layers_read_as; read_as[i] < i) holds its own shares alone, its ops and parameters being the earlier
// layer's.
std::vector<LayerOps> record_stack_as_read(const ModelConfig& config, const ModelConfig& rank_config, int64_t tokens,
                                           const std::vector<RecomputeShares>& shares, const std::vector<int64_t>& read_as,
                                           int64_t sequence_shards = 1, const StepOptions& tuned = {});
// The final norm, the LM head and the causal-LM loss on one sequence of `tokens` tokens.
LayerOps record_output(const ModelConfig& config, int64_t tokens, const StepOptions& tuned = {});
// The token embedding's lookup forward, and its backward (a zeroed (V, H) gradient and the rows added);
// under adapters the embedding is frozen and runs no backward.
LayerOps record_embedding(const ModelConfig& config, int64_t tokens, const StepOptions& tuned = {});

// What layer `layer_index` of `rank_config` keeps from its forward for its backward on a micro-batch of
// `batch` sequences of `tokens` tokens, under `recompute` as the step wraps it (plain, a selective or a
// full checkpoint): the bytes of the storages its forward makes that are still live when it returns,
// its output left out. A micro-batch in flight in the step holds at least this of each of its layers
// (the same ops on the same shapes), which makes the plan's memory lower bound.
// `input_kept`: also the bytes of its input it keeps (a checkpoint's saved input), or 0, where asked.
// `sequence_shards` > 1: the layer as DTensor's plan with sequence parallelism over that many TP ranks
// runs it, on the rank's S / T tokens of the stream (`rank_config` the step's rank config).
int64_t layer_kept_bytes(const ModelConfig& rank_config, int64_t layer_index, int64_t tokens, int64_t batch,
                         Recompute recompute, int64_t* input_kept = nullptr, int64_t sequence_shards = 1);

// What each decoder layer keeps of a micro-batch of `batch` sequences of `tokens` tokens as the model's
// forward runs it (models/causal_lm.h: the model from `config`, its layers from `rank_config`), each
// layer under `recompute` as the step wraps it: the bytes of the storages its ops made first that are
// still live once the whole forward has returned. An unpipelined step's
// micro-batch holds at least this of every layer at its first backward (the same forward); the bound of
// a layer that cannot run alone (Family::stack_only), by layer index. Where the family's layers are alike
// by kind, read off the forward as far as each kind's first layer after the model's first (a storage the
// layers share is counted to the first that made it; `whole`: every layer's own).
std::vector<int64_t> stack_kept_bytes(const ModelConfig& config, const ModelConfig& rank_config, int64_t tokens,
                                      int64_t batch, Recompute recompute, bool whole = false);

// What layer `layer_index` of `rank_config` holds at the most of its first backward on a micro-batch of
// `batch` sequences of `tokens` tokens, under `recompute` as the step wraps it: the bytes of the
// storages its forward and backward ops made that are live at once, parameters and their gradients, its
// input, its output and its output's gradient left out (Note [A layer's backward in the memory bound]).
int64_t layer_backward_bytes(const ModelConfig& rank_config, int64_t layer_index, int64_t tokens, int64_t batch,
                             Recompute recompute);

// layer_backward_bytes of every decoder layer of a model whose layers are alike by kind
// (Family::stack_layers_alike_by_kind) and cannot run alone, by layer index: its kind's first layer run
// inside the model's forward (`config` the model, `rank_config` its layers), on its own input (Note [A
// layer's backward inside the model]).
std::vector<int64_t> stack_layer_backward_bytes(const ModelConfig& config, const ModelConfig& rank_config,
                                                int64_t tokens, int64_t batch, Recompute recompute);

// What the last stage holds of its final norm, LM head and loss at the most of its first backward there
// (the model's own, run on a micro-batch of `batch` sequences of `tokens` tokens): the bytes of the
// storages their ops made that are live at once, parameters and their gradients left out (Note [The
// loss's backward in the memory bound]).
int64_t head_backward_bytes(const ModelConfig& config, int64_t tokens, int64_t batch);

// One pass of recorded ops at a micro-batch of `batch` sequences, with the attention kernel's work
// `ring` times the recorded shard's (a context-parallel rank's S/C queries against all S keys).
struct PassTime {
  double forward = 0;
  double backward = 0;
  double gemm_forward = 0;             // of forward, the GEMMs' (what TP's collectives can hide behind)
  double gemm_backward = 0;
  double attention_forward = 0;        // the attention kernel's
  double attention_backward = 0;
  double selective_recompute = 0;      // what the selective backward runs again
};
PassTime pass_time(const LayerOps& ops, int64_t batch, const Rates& rates, int64_t ring = 1);

// A group of ranks for a collective: n ranks, those of one node (ranks_per_node, at most n), the
// link and NIC figures.
struct Group {
  int64_t ranks = 1;
  int64_t ranks_per_node = 1;  // of the group, how many share a node
  bool inside_node() const { return ranks_per_node >= ranks; }
};
struct Network {
  double link_bytes_per_s = 0, nic_bytes_per_s = 0;  // the datasheet's, each direction
  Calibration calibration;
  static Network of(const Device& device);
};
double all_reduce_seconds(int64_t bytes, const Group& group, const Network& net);
double all_gather_seconds(int64_t bytes, const Group& group, const Network& net);  // also reduce-scatter
double all_to_all_seconds(int64_t bytes, const Group& group, const Network& net);  // a rank's bytes
double send_seconds(int64_t bytes, bool inside_node, const Network& net);

}  // namespace census
