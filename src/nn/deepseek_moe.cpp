#include "nn/deepseek_moe.h"

#include "ops/ops.h"

namespace census::nn {

DeepseekV3TopkRouter::DeepseekV3TopkRouter(std::string path, const GroupLimitedRouting& routing, int64_t hidden_size,
                                           ParameterList& params)
    : path_(std::move(path)),
      routing_(routing),
      weight_(register_parameter(params, path_, "weight", Dims{routing.num_experts, hidden_size})),
      // A buffer made as the layer is built, in the default dtype (bf16) unless the family states fp32:
      // the layer the reference census builds. A checkpoint loaded with _keep_in_fp32_modules_strict
      // holds it in fp32, which changes the router's traffic by 2 bytes an expert and nothing else (the
      // sum with the fp32 scores is fp32).
      e_score_correction_bias_(make_tensor(Dims{routing.num_experts},
                                           routing.correction_bias_dtype.value_or(Session::current().default_dtype()))) {}

Routing DeepseekV3TopkRouter::forward(const Tensor& input) const {
  ModuleScope scope(path_, ModuleKind::kOther);
  const int64_t experts = routing_.num_experts, groups = routing_.n_group;
  const Tensor hidden_states = ops::view(input, Dims{input.numel() / input.size(-1), input.size(-1)});
  const int64_t tokens = hidden_states.size(0);
  Tensor router_logits;
  {
    // x.type(float32), then the weight's: two fp32 copies the linear keeps.
    const Tensor x = ops::to(hidden_states, DType::kFloat32);
    const Tensor weight = ops::to(weight_, DType::kFloat32);
    router_logits = ops::linear(x, weight);  // (T, E) fp32
  }
  const Tensor scores = ops::sigmoid(router_logits);
  Tensor scores_for_choice = ops::add(scores, e_score_correction_bias_);
  // Each group scored by the sum of its two best experts; the graph of these selections reaches no
  // loss, and is freed with its locals as the router returns.
  const Tensor group_scores =
      ops::sum(ops::topk(ops::view(scores_for_choice, Dims{tokens, groups, experts / groups}), 2).values, {2}, false);
  const Tensor group_idx = ops::topk(group_scores, routing_.topk_group).indices;
  Tensor group_mask = ops::zeros_like(group_scores);
  ops::scatter_(group_mask, 1, group_idx, 1.0);
  const Tensor score_mask = ops::reshape(
      ops::expand(ops::unsqueeze(group_mask, -1), Dims{tokens, groups, experts / groups}), Dims{tokens, experts});
  // masked_fill(~score_mask.bool(), -inf): the groups not chosen leave their experts out.
  scores_for_choice = ops::masked_fill(scores_for_choice, ops::bitwise_not(ops::to(score_mask, DType::kBool)));
  Tensor topk_indices = ops::topk(scores_for_choice, routing_.top_k).indices;
  Tensor topk_weights = ops::gather(scores, 1, topk_indices);  // (T, K) fp32
  Tensor denominator;
  if (routing_.norm_topk_prob) {
    denominator = ops::add(ops::sum(topk_weights, {1}, true), 1e-20);
    ops::div_(topk_weights, denominator);
  }
  topk_weights = ops::mul_number(topk_weights, routing_.routed_scaling_factor);
  return {std::move(router_logits), std::move(topk_weights), std::move(topk_indices)};
}

DeepseekV3MoE::DeepseekV3MoE(std::string path, const GroupLimitedRouting& routing, const Sizes& sizes,
                             ParameterList& params)
    : path_(std::move(path)),
      experts(child_path(path_, "experts"), routing.num_experts / sizes.expert_parallel, sizes.hidden_size,
              sizes.moe_intermediate_size,
              sizes.act, sizes.implementation, params),
      gate(child_path(path_, "gate"), routing, sizes.hidden_size, params),
      shared_experts(child_path(path_, "shared_experts"), sizes.hidden_size, sizes.shared_intermediate_size, false,
                     params, sizes.act) {}

Tensor DeepseekV3MoE::forward(const Tensor& input) const {
  ModuleScope scope(path_, ModuleKind::kOther);
  const Tensor residuals = input;
  const Dims orig_shape = input.sizes();
  const Routing routing = gate.forward(input);
  Tensor hidden_states = ops::view(input, Dims{orig_shape[0] * orig_shape[1], orig_shape[2]});
  hidden_states = ops::view(experts.forward(hidden_states, routing.indices, routing.weights), orig_shape);
  {
    // The shared experts' output is a temporary, gone before hidden_states is rebound.
    Tensor sum = ops::add(hidden_states, shared_experts.forward(residuals));
    hidden_states = sum;
  }
  return hidden_states;
}

}  // namespace census::nn
