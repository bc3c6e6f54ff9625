#include "nn/minimax_moe.h"

#include "ops/ops.h"

namespace census::nn {

MiniMaxM2TopKRouter::MiniMaxM2TopKRouter(std::string path, int64_t num_experts, int64_t top_k, int64_t hidden_size,
                                         ParameterList& params)
    : path_(std::move(path)),
      top_k_(top_k),
      weight_(register_parameter(params, path_, "weight", Dims{num_experts, hidden_size})) {}

Routing MiniMaxM2TopKRouter::forward(const Tensor& input, const Tensor& e_score_correction_bias) const {
  ModuleScope scope(path_, ModuleKind::kOther);
  const Tensor hidden_states = ops::reshape(input, Dims{input.numel() / input.size(-1), input.size(-1)});
  Tensor router_logits = ops::linear(ops::to(hidden_states, weight_.dtype()), weight_);  // (T, E) bf16
  const Tensor routing_weights = ops::sigmoid(ops::to(router_logits, DType::kFloat32));   // (T, E) fp32
  // The biased scores choose; the weights are the unbiased scores.
  const Tensor scores_for_choice = ops::add(routing_weights, e_score_correction_bias);
  Tensor top_k_index = ops::topk(scores_for_choice, top_k_).indices;
  Tensor top_k_weights = ops::gather(routing_weights, 1, top_k_index);  // (T, K) fp32
  ops::div_(top_k_weights, ops::sum(top_k_weights, {1}, /*keepdim=*/true));
  return {std::move(router_logits), std::move(top_k_weights), std::move(top_k_index)};
}

MiniMaxM2SparseMoeBlock::MiniMaxM2SparseMoeBlock(std::string path, MiniMaxM2TopKRouter gate_in,
                                                 std::unique_ptr<MoeExperts> experts_in, int64_t num_experts)
    : path_(std::move(path)),
      gate(std::move(gate_in)),
      experts(std::move(experts_in)),
      e_score_correction_bias_(make_tensor(Dims{num_experts}, Session::current().default_dtype())) {}

Tensor MiniMaxM2SparseMoeBlock::forward(const Tensor& input) const {
  ModuleScope scope(path_, ModuleKind::kOther);
  const Dims shape = input.sizes();  // (B, S, H)
  Tensor hidden_states = ops::view(input, Dims{shape[0] * shape[1], shape[2]});
  const Routing routing = gate.forward(hidden_states, e_score_correction_bias_);
  hidden_states = experts->forward(hidden_states, routing.indices, routing.weights);
  return ops::reshape(hidden_states, shape);
}

}  // namespace census::nn
