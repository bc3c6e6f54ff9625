#include "nn/ernie_moe.h"

#include "ops/ops.h"

namespace census::nn {

Ernie4_5_MoeTopKRouter::Ernie4_5_MoeTopKRouter(std::string path, int64_t num_experts, int64_t top_k,
                                               int64_t hidden_size, double norm_min, ParameterList& params)
    : path_(std::move(path)),
      statics_path_(child_path(path_, "moe_statics")),
      top_k_(top_k),
      norm_min_(norm_min),
      weight_(register_parameter(params, path_, "weight", Dims{num_experts, hidden_size}, DType::kFloat32)),
      e_score_correction_bias_(
          register_parameter(params, statics_path_, "e_score_correction_bias", Dims{1, num_experts}, DType::kFloat32)) {
  // nn.Parameter(..., requires_grad=False): a parameter autograd never differentiates.
  e_score_correction_bias_.impl()->requires_grad = false;
}

Routing Ernie4_5_MoeTopKRouter::forward(const Tensor& hidden_states) const {
  ModuleScope scope(path_, ModuleKind::kOther);
  Tensor router_logits = ops::linear(ops::to(hidden_states, DType::kFloat32), ops::to(weight_, DType::kFloat32));
  Tensor routing_weights = ops::softmax(router_logits, 1, DType::kFloat32);  // (T, E) fp32
  Tensor selected_experts;
  {
    Tensor biased;
    {
      ModuleScope statics(statics_path_, ModuleKind::kOther);
      biased = ops::add(routing_weights, ops::squeeze(e_score_correction_bias_, 0));
    }
    selected_experts = ops::topk(biased, top_k_).indices;
  }
  routing_weights = ops::gather(routing_weights, -1, selected_experts);  // (T, K) fp32
  routing_weights = ops::div(routing_weights, ops::clamp(ops::sum(routing_weights, {1}, /*keepdim=*/true), norm_min_,
                                                         std::nullopt));
  routing_weights = ops::to(routing_weights, hidden_states.dtype());
  return {std::move(router_logits), std::move(routing_weights), std::move(selected_experts)};
}

Ernie4_5_MoeSparseMoeBlock::Ernie4_5_MoeSparseMoeBlock(std::string path, Ernie4_5_MoeTopKRouter gate_in,
                                                       std::unique_ptr<MoeExperts> experts_in, int64_t hidden_size,
                                                       int64_t shared_intermediate_size, bool bias, HiddenAct act,
                                                       ParameterList& params)
    : path_(std::move(path)), gate(std::move(gate_in)), experts(std::move(experts_in)) {
  if (shared_intermediate_size > 0)
    shared_experts.emplace(child_path(path_, "shared_experts"), hidden_size, shared_intermediate_size, bias, params, act);
}

Tensor Ernie4_5_MoeSparseMoeBlock::forward(const Tensor& input) const {
  ModuleScope scope(path_, ModuleKind::kOther);
  const Dims shape = input.sizes();  // (B, S, H)
  const Tensor hidden_states = ops::view(input, Dims{shape[0] * shape[1], shape[2]});
  Tensor shared_output;
  if (shared_experts) shared_output = shared_experts->forward(hidden_states);
  const Routing routing = gate.forward(hidden_states);
  Tensor final_hidden_states = experts->forward(hidden_states, routing.indices, routing.weights);
  if (shared_experts) final_hidden_states = ops::add(final_hidden_states, shared_output);
  final_hidden_states = ops::reshape(final_hidden_states, shape);
  return ops::to(final_hidden_states, hidden_states.dtype());
}

}  // namespace census::nn
