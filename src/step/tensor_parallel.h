// File: tensor_parallel.h
// Tensor parallelism as DTensor runs it on one rank of T: torchtitan's Llama plan applied by
// parallelize_module to Transformers' module names (the parallel oracle's plan), each style run on the
// rank's local tensors with its collectives as ops (ops/ops.h: the redistributions and the
// vocabulary-parallel embedding and loss):
//
//   model.embed_tokens  RowwiseParallel(input Replicate, output Shard(1) | Replicate): the rank's
//                       V / T rows, its ids masked; the partial output reduce-scattered over the
//                       sequence (SP) or all-reduced; its gradient the whole table, replicated
//   input_layernorm, post_attention_layernorm, model.norm
//                       SequenceParallel (SP): each runs on the rank's S / T tokens; else whole
//   self_attn, mlp      PrepareModuleInput (SP): the normed stream all-gathered (Shard(1) -> Replicate)
//   q/k/v_proj, mlp.gate_proj, mlp.up_proj
//                       ColwiseParallel: the rank's heads and columns; without SP the plain input's
//                       gradient comes back partial and is all-reduced (from_local's backward)
//   o_proj, mlp.down_proj
//                       RowwiseParallel(output Shard(1) | Replicate): the partial output reduce-scattered
//                       over the sequence (SP) or all-reduced
//   lm_head             ColwiseParallel(input Shard(1) | Replicate, output Shard(-1) with loss_parallel,
//                       else all-gathered over the vocabulary)
//   the loss            loss_parallel: log_softmax and nll_loss on the rank's vocabulary shard
//   a MoE block (mlp)   experts and router replicated on the TP group (no expert TP, as the oracle);
//                       under SP its input all-gathered to a plain tensor and its output handed back as
//                       the rank's Shard(1) slice (PrepareModuleOutput)
//
// Not for: layers whose projections the plan does not name (MLA's low-rank projections, the gated delta
// net, Mamba's mixer): tensor_parallel_refusal names them.
#pragma once

#include <cstdint>

#include "models/config.h"
#include "nn/tensor_parallel.h"

namespace census {

struct TensorParallelPlan {
  int64_t degree = 1;
  bool sequence_parallel = false;
  bool loss_parallel = false;
  int64_t vocab_size = 0;       // the whole vocabulary (the embedding's gradient)
  int64_t sequence_length = 0;  // each sequence's tokens before SP shards them
};

class DTensorStyles final : public nn::ParallelStyles {
 public:
  explicit DTensorStyles(const TensorParallelPlan& plan) : plan_(plan) {}
  Tensor module_input(std::string_view module, const Tensor& x) const override;
  Tensor module_output(std::string_view module, const Tensor& y) const override;
  Tensor linear(std::string_view path, const Tensor& input, const Tensor& weight, const Tensor& bias) const override;
  Tensor embedding(std::string_view path, const Tensor& weight, const Tensor& input_ids) const override;
  int64_t loss_parallel_ranks() const override { return plan_.loss_parallel ? plan_.degree : 0; }
  int64_t sequence_shards() const override { return plan_.sequence_parallel ? plan_.degree : 1; }

 private:
  TensorParallelPlan plan_;
};

// Whether the plan shards the parameter named `name` ("self_attn.q_proj.weight", "lm_head.weight") over
// the TP ranks: its global numel is T times the rank's.
bool sharded_by_plan(std::string_view name);

// Whether the parameter named `name` is a DTensor under the plan (parallelize_module made it one): every
// parameter of a module the plan names (a rowwise layer's bias replicated), and under sequence
// parallelism the norms SequenceParallel takes. The rest stay plain tensors (a MoE block's router and
// experts, Qwen3's q_norm and k_norm, and without sequence parallelism the norms).
bool dtensor_by_plan(std::string_view name, bool sequence_parallel);

// Why the plan cannot run `config` (null: it can): a family whose layers it does not name.
const char* tensor_parallel_refusal(const ModelConfig& config);

// The config one rank builds its decoder layers from: the attention heads and the dense MLP's width
// divided by T; a MoE block's experts, router and shared experts whole (replicated on the TP group).
ModelConfig dtensor_layer_config(const ModelConfig& config, int64_t tp);

}  // namespace census
