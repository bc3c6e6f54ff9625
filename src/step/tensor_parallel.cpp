#include "step/tensor_parallel.h"

#include <array>
#include <string>

#include "ops/ops.h"

namespace census {
namespace {

constexpr std::array<std::string_view, 5> kColwise = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                                     "mlp.gate_proj", "mlp.up_proj"};
constexpr std::array<std::string_view, 2> kRowwise = {"self_attn.o_proj", "mlp.down_proj"};

template <size_t N>
bool named(const std::array<std::string_view, N>& names, std::string_view path) {
  for (std::string_view name : names)
    if (name == path) return true;
  return false;
}

}  // namespace

Tensor DTensorStyles::module_input(std::string_view /*module*/, const Tensor& x) const {
  // PrepareModuleInput(Shard(1) -> Replicate) on self_attn and mlp: q/k/v (gate/up) share one all-gather.
  if (!plan_.sequence_parallel) return x;
  return ops::shard_to_replicate(x, 1, plan_.degree);
}

Tensor DTensorStyles::module_output(std::string_view /*module*/, const Tensor& y) const {
  // A MoE block's output under SP is handed back as the rank's Shard(1) slice (PrepareModuleOutput); a
  // dense MLP's down_proj has already reduce-scattered it (its output is S / T tokens).
  if (!plan_.sequence_parallel || y.size(1) != plan_.sequence_length) return y;
  return ops::replicate_to_shard(y, 1, plan_.degree);
}

Tensor DTensorStyles::linear(std::string_view path, const Tensor& input, const Tensor& weight, const Tensor& bias) const {
  const int64_t t = plan_.degree;
  if (named(kColwise, path)) {
    if (plan_.sequence_parallel) return ops::linear(input, weight, bias);  // a Replicate DTensor already
    return ops::linear(ops::replicate_with_partial_grad(input, t), weight, bias);
  }
  if (named(kRowwise, path)) {
    const Tensor partial = ops::linear(input, weight, bias);
    return plan_.sequence_parallel ? ops::partial_to_shard(partial, 1, t) : ops::partial_to_replicate(partial, t);
  }
  if (path == "lm_head") {
    const Tensor replicated = plan_.sequence_parallel ? ops::shard_to_replicate(input, 1, t)
                                                      : ops::replicate_with_partial_grad(input, t);
    Tensor logits = ops::linear(replicated, weight, bias);
    if (plan_.loss_parallel) return logits;  // Shard(-1): the rank's V / T columns
    return ops::shard_to_replicate(logits, logits.dim() - 1, t);
  }
  return ops::linear(input, weight, bias);
}

Tensor DTensorStyles::embedding(std::string_view /*path*/, const Tensor& weight, const Tensor& input_ids) const {
  const Tensor partial = ops::vocab_parallel_embedding(weight, input_ids, plan_.vocab_size, plan_.degree);
  return plan_.sequence_parallel ? ops::partial_to_shard(partial, 1, plan_.degree)
                                 : ops::partial_to_replicate(partial, plan_.degree);
}

bool sharded_by_plan(std::string_view name) {
  const size_t dot = name.rfind('.');
  if (dot == std::string_view::npos) return false;
  const std::string_view module = name.substr(0, dot), field = name.substr(dot + 1);
  if (module == "model.embed_tokens" || module == "lm_head") return true;
  return named(kRowwise, module) ? field == "weight" : named(kColwise, module);
}

bool dtensor_by_plan(std::string_view name, bool sequence_parallel) {
  const size_t dot = name.rfind('.');
  if (dot == std::string_view::npos) return false;
  const std::string_view module = name.substr(0, dot);
  if (module == "model.embed_tokens" || module == "lm_head" || named(kColwise, module) || named(kRowwise, module))
    return true;
  return sequence_parallel &&
         (module == "input_layernorm" || module == "post_attention_layernorm" || module == "model.norm");
}

const char* tensor_parallel_refusal(const ModelConfig& config) {
  if (config.family->names_llama_tp_plan) return nullptr;
  return "torchtitan's plan names Llama's modules (self_attn.q/k/v/o_proj, mlp.gate/up/down_proj, the norms); "
         "this family's layers (its attention's own projections, a linear-attention or Mamba mixer) are not "
         "named by it, so its DTensor plan is not simulated: run --tp without --sequence-parallel and "
         "--loss-parallel (the layers' heads and widths divided)";
}

ModelConfig dtensor_layer_config(const ModelConfig& config, int64_t tp) {
  ModelConfig rank = tp_config(config, tp);
  rank.moe.moe_intermediate_size = config.moe.moe_intermediate_size;  // the experts replicated on the TP group
  rank.moe.shared_expert_intermediate_size = config.moe.shared_expert_intermediate_size;
  // Mixtral's experts have no width of their own: they are intermediate_size wide, and every layer is
  // MoE, so no dense MLP shares that width for the plan to shard.
  if (config.moe.num_experts > 0 && config.moe.moe_intermediate_size == 0) rank.intermediate_size = config.intermediate_size;
  return rank;
}

}  // namespace census
