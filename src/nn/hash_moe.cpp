#include "nn/hash_moe.h"

#include "ops/ops.h"

namespace census::nn {

ClampedSwiGluMlp::ClampedSwiGluMlp(const std::string& path, int64_t hidden_size, int64_t intermediate_size, double limit,
                                   HiddenAct act, ParameterList& params)
    : path_(path),
      gate_proj(child_path(path, "gate_proj"), hidden_size, intermediate_size, false, params),
      up_proj(child_path(path, "up_proj"), hidden_size, intermediate_size, false, params),
      down_proj(child_path(path, "down_proj"), intermediate_size, hidden_size, false, params),
      act_fn(child_path(path, "act_fn"), act),
      limit_(limit) {}

Tensor ClampedSwiGluMlp::forward(const Tensor& x) const {
  ModuleScope scope(path_, ModuleKind::kOther);
  Tensor gate = ops::clamp(gate_proj.forward(x), std::nullopt, limit_);
  Tensor up = ops::clamp(up_proj.forward(x), -limit_, limit_);
  return down_proj.forward(ops::mul(act_fn.forward(gate), up));
}

DeepseekV4Router::DeepseekV4Router(std::string path, const DeepseekV4MoeSizes& sizes, bool hash, ParameterList& params)
    : path_(std::move(path)), sizes_(sizes), hash_(hash) {
  weight_ = register_parameter(params, path_, "weight", Dims{sizes.num_experts, sizes.hidden_size});
  if (hash)
    tid2eid_ = make_tensor(Dims{sizes.vocab_size, sizes.top_k}, DType::kInt64);
  else
    e_score_correction_bias_ = make_tensor(Dims{sizes.num_experts}, Session::current().default_dtype());
}

Routing DeepseekV4Router::forward(const Tensor& hidden_states, const Tensor& input_ids) const {
  ModuleScope scope(path_, ModuleKind::kOther);
  const Tensor flat = ops::reshape(hidden_states, Dims{hidden_states.numel() / sizes_.hidden_size, sizes_.hidden_size});
  Routing out;
  out.logits = ops::linear(flat, weight_);             // (T, E)
  const Tensor scores = ops::sqrt(ops::softplus(out.logits));  // ACT2FN["sqrtsoftplus"]
  if (hash_) {
    out.indices = ops::index(tid2eid_, ops::reshape(input_ids, Dims{input_ids.numel()}));  // (T, K) int64
  } else {
    out.indices = ops::topk(ops::add(scores, e_score_correction_bias_), sizes_.top_k).indices;
  }
  Tensor weights = ops::gather(scores, 1, out.indices);
  weights = ops::div(weights, ops::add(ops::sum(weights, {1}, /*keepdim=*/true), 1e-20));
  out.weights = ops::mul_number(weights, sizes_.routed_scaling_factor);
  return out;
}

namespace {

ExpertsLayout clamped_layout(double limit) {
  ExpertsLayout layout;
  layout.clamped_halves = true;
  layout.limit = limit;
  return layout;
}

}  // namespace

DeepseekV4SparseMoeBlock::DeepseekV4SparseMoeBlock(const std::string& path, const DeepseekV4MoeSizes& sizes, bool hash,
                                                   ParameterList& params)
    : path_(path),
      gate(child_path(path, "gate"), sizes, hash, params),
      experts(child_path(path, "experts"), sizes.num_experts / sizes.expert_parallel, sizes.hidden_size,
              sizes.intermediate_size, sizes.act, sizes.experts_implementation, params, clamped_layout(sizes.swiglu_limit)),
      shared_experts(child_path(path, "shared_experts"), sizes.hidden_size, sizes.intermediate_size, sizes.swiglu_limit,
                     sizes.act, params) {}

Tensor DeepseekV4SparseMoeBlock::forward(const Tensor& hidden_states, const Tensor& input_ids) const {
  ModuleScope scope(path_, ModuleKind::kOther);
  const int64_t batch = hidden_states.size(0), seq = hidden_states.size(1), hidden_dim = hidden_states.size(2);
  const Tensor flat = ops::view(hidden_states, Dims{batch * seq, hidden_dim});
  Routing routing = gate.forward(hidden_states, input_ids);
  routing.logits = Tensor();  // `_, weights, indices = self.gate(...)`
  Tensor routed = ops::view(experts.forward(flat, routing.indices, routing.weights), Dims{batch, seq, hidden_dim});
  return ops::add(routed, shared_experts.forward(hidden_states));
}

}  // namespace census::nn
