#include "nn/hunyuan_moe.h"

#include "ops/ops.h"

namespace census::nn {

HunYuanMoEV1Gate::HunYuanMoEV1Gate(std::string path, int64_t num_experts, int64_t top_k, int64_t hidden_size,
                                   ParameterList& params)
    : path_(std::move(path)),
      top_k_(top_k),
      wg(child_path(path_, "wg"), hidden_size, num_experts, /*bias=*/false, params, DType::kFloat32) {}

Routing HunYuanMoEV1Gate::forward(const Tensor& input) const {
  ModuleScope scope(path_, ModuleKind::kOther);
  Tensor hidden_states = ops::reshape(input, Dims{input.numel() / input.size(-1), input.size(-1)});
  // `if self.wg.weight.dtype == torch.float32: hidden_states = hidden_states.float()`: wg is made fp32,
  // but a rank under FSDP2's mixed precision reads it in bf16, and the router then runs in bf16.
  if (wg.weight().dtype() == DType::kFloat32) hidden_states = ops::to(hidden_states, DType::kFloat32);
  Tensor router_logits = wg.forward(hidden_states);          // (T, E), fp32 beside an fp32 wg
  const Tensor probs = ops::softmax(router_logits, 1, DType::kFloat32);
  auto [routing_weights, selected_experts] = ops::topk(probs, top_k_);  // (T, K)
  ops::div_(routing_weights, ops::sum(routing_weights, {1}, /*keepdim=*/true));
  routing_weights = ops::to(routing_weights, router_logits.dtype());
  return {std::move(router_logits), std::move(routing_weights), std::move(selected_experts)};
}

HunYuanMoEV1Moe::HunYuanMoEV1Moe(std::string path, HunYuanMoEV1Gate gate_in, std::unique_ptr<MoeExperts> experts_in,
                                 int64_t hidden_size, int64_t shared_intermediate_size, HiddenAct act,
                                 ParameterList& params)
    : path_(std::move(path)),
      gate(std::move(gate_in)),
      experts(std::move(experts_in)),
      shared_mlp(child_path(path_, "shared_mlp"), hidden_size, shared_intermediate_size, false, params, act) {}

Tensor HunYuanMoEV1Moe::forward(const Tensor& input) const {
  ModuleScope scope(path_, ModuleKind::kOther);
  const Dims shape = input.sizes();  // (B, S, H)
  const Tensor hidden_states_mlp = shared_mlp.forward(input);
  const Tensor hidden_states = ops::view(input, Dims{shape[0] * shape[1], shape[2]});
  const Routing routing = gate.forward(hidden_states);
  const Tensor final_hidden_states =
      ops::reshape(experts->forward(hidden_states, routing.indices, routing.weights), shape);
  return ops::add(final_hidden_states, hidden_states_mlp);
}

}  // namespace census::nn
