#include "nn/moe.h"

#include <algorithm>

#include "ops/ops.h"

namespace census::nn {

TopKRouter::TopKRouter(std::string path, int64_t num_experts, int64_t top_k, int64_t hidden_size, Options options,
                       ParameterList& params)
    : path_(std::move(path)),
      top_k_(top_k),
      options_(options),
      weight_(register_parameter(params, path_, "weight", Dims{num_experts, hidden_size})) {}

Routing TopKRouter::forward(const Tensor& input) const {
  ModuleScope scope(path_, ModuleKind::kOther);
  const Tensor hidden_states = ops::reshape(input, Dims{input.numel() / input.size(-1), input.size(-1)});
  Tensor router_logits = ops::linear(hidden_states, weight_);                          // (T, E)
  const Tensor router_probs = ops::softmax(router_logits, -1, DType::kFloat32);        // (T, E) fp32
  auto [router_top_value, router_indices] = ops::topk(router_probs, top_k_);            // (T, K)
  if (options_.norm_topk_prob) ops::div_(router_top_value, ops::sum(router_top_value, {1}, /*keepdim=*/true));
  // Qwen casts the weights back, freeing the fp32 values; Mixtral hands the fp32 values on.
  if (options_.weights_in_logits_dtype) router_top_value = ops::to(router_top_value, router_logits.dtype());
  return {std::move(router_logits), std::move(router_top_value), std::move(router_indices)};
}

Experts::Experts(std::string path, int64_t num_experts, int64_t hidden_size, int64_t intermediate_size, HiddenAct act,
                 ExpertsImplementation implementation, ParameterList& params, ExpertsLayout layout)
    : path_(std::move(path)),
      num_experts_(num_experts),
      implementation_(implementation),
      layout_(layout),
      act_fn_(child_path(path_, "act_fn"), act) {
  const int64_t E = num_experts, H = hidden_size, I = intermediate_size;
  const int64_t up = layout.has_gate ? 2 * I : I;
  gate_up_proj_ = register_parameter(params, path_, layout.has_gate ? "gate_up_proj" : "up_proj",
                                     layout.transposed ? Dims{E, H, up} : Dims{E, up, H});
  if (layout.has_bias) gate_up_proj_bias_ = register_parameter(params, path_, "gate_up_proj_bias", Dims{E, 2 * I});
  down_proj_ = register_parameter(params, path_, "down_proj", layout.transposed ? Dims{E, I, H} : Dims{E, H, I});
  if (layout.has_bias) down_proj_bias_ = register_parameter(params, path_, "down_proj_bias", Dims{E, H});
}

Tensor Experts::forward(const Tensor& hidden_states, const Tensor& top_k_index, const Tensor& top_k_weights) const {
  ModuleScope scope(path_, ModuleKind::kOther);
  return implementation_ == ExpertsImplementation::kGroupedMm
             ? grouped_mm_forward(hidden_states, top_k_index, top_k_weights)
             : eager_forward(hidden_states, top_k_index, top_k_weights);
}

// grouped_mm_experts_forward. Its locals are declared in the order Python first binds them, so that
// C++ destroys them at return in the order the interpreter clears the frame (the last bound first).
Tensor Experts::grouped_mm_forward(const Tensor& hidden_states, const Tensor& top_k_index,
                                   const Tensor& top_k_weights) const {
  const int64_t num_top_k = top_k_index.size(-1);
  const int64_t num_tokens = hidden_states.size(0);
  const int64_t hidden_dim = hidden_states.size(-1);
  const int64_t pairs = num_tokens * num_top_k;  // S

  Tensor sample_weights = ops::reshape(top_k_weights, Dims{pairs});
  Tensor expert_ids = ops::reshape(top_k_index, Dims{pairs});
  // Sort the pairs by expert: the experts' rows become contiguous groups.
  auto [expert_ids_g, perm] = ops::sort(expert_ids);
  Tensor selected_hidden_states_g = ops::index(hidden_states, ops::floor_divide(perm, num_top_k));  // (S, H)
  Tensor sample_weights_g = ops::index(sample_weights, perm);                                        // (S)
  // Tokens per expert by histc (of a float copy, as on CPU), their running sum the groups' offsets.
  Tensor histc_input = ops::to(expert_ids_g, DType::kFloat32);
  Tensor tokens_per_expert = ops::histc(histc_input, num_experts_);
  Tensor offsets = ops::cumsum(tokens_per_expert, 0, DType::kInt32);  // (E) int32
  // Expert-parallel sentinels (ids >= E) are masked; with plain routing the mask is all false, but
  // its ops run and it is saved.
  Tensor sentinel_mask = ops::unsqueeze(ops::ge(expert_ids_g, static_cast<double>(num_experts_)), -1);  // (S, 1)
  ops::clamp_max_(expert_ids_g, static_cast<double>(num_experts_ - 1));
  // The biases, gathered per pair from the sorted expert ids (which their gathers keep).
  Tensor selected_weights = gate_up_proj_;
  Tensor selected_biases = layout_.has_bias ? ops::index(gate_up_proj_bias_, expert_ids_g) : Tensor();  // (S, 2I)
  ops::masked_fill_(selected_hidden_states_g, sentinel_mask, 0.0);

  Tensor proj_out = grouped_linear(selected_hidden_states_g, selected_weights, offsets, selected_biases);  // (S, 2I)
  proj_out = apply_gate(proj_out);                                                                      // (S, I)
  selected_weights = down_proj_;
  selected_biases = layout_.has_bias ? ops::index(down_proj_bias_, expert_ids_g) : Tensor();  // (S, H)
  proj_out = grouped_linear(proj_out, selected_weights, offsets, selected_biases);            // (S, H)

  // Weighted by the routing weights: fp32 where the router kept them fp32.
  Tensor weighted_out = ops::mul(proj_out, ops::unsqueeze(sample_weights_g, -1));
  ops::masked_fill_(weighted_out, sentinel_mask, 0.0);

  // Back to token order, then each token's K rows summed.
  Tensor inv_perm = ops::empty_like(perm);
  ops::index_put_(inv_perm, perm, ops::arange(pairs));
  weighted_out = ops::index(weighted_out, inv_perm);
  Tensor final_hidden_states = ops::sum(ops::view(weighted_out, Dims{num_tokens, num_top_k, hidden_dim}), {1}, false);
  return ops::to(final_hidden_states, hidden_states.dtype());
}


// The experts class's own forward (Note [Eager experts under shapes alone]). Locals as Python binds
// them; each iteration rebinds the loop's, freeing what the previous expert left unsaved.
Tensor Experts::eager_forward(const Tensor& hidden_states, const Tensor& top_k_index, const Tensor& top_k_weights) const {
  const int64_t pairs = top_k_index.numel();
  const int64_t experts_hit = std::min(num_experts_, pairs);
  Tensor final_hidden_states = ops::zeros_like(hidden_states);
  Tensor expert_mask, expert_hit;
  {
    NoGradGuard no_grad;
    expert_mask = ops::permute(ops::one_hot(top_k_index, num_experts_), {2, 1, 0});  // (E, K, T) int64
    Tensor greater;
    {
      greater = ops::gt(ops::sum(expert_mask, {1, 2}, false), 0);  // the sum dies with the statement
    }
    expert_hit = ops::nonzero(greater, experts_hit);  // (hit, 1)
  }
  const std::vector<Tensor> hit_rows = ops::unbind(expert_hit, 0);  // iterating a tensor
  Tensor expert_idx, top_k_pos, token_idx, current_state, gate, up, current_hidden_states;
  for (int64_t e = 0; e < experts_hit; ++e) {
    expert_idx = ops::select(hit_rows[static_cast<size_t>(e)], 0, 0);
    ops::item(ops::eq(expert_idx, static_cast<double>(num_experts_)));  // `if expert_idx == num_experts`
    // Every index with the 0-d expert_idx reads it back (item) and selects: the mask's row below, and
    // each expert weight (and bias).
    ops::item(expert_idx);
    const int64_t received = pairs / num_experts_ + (e < pairs % num_experts_ ? 1 : 0);
    {
      // torch.where(mask): nonzero, unbound into the two index columns.
      const std::vector<Tensor> where = ops::unbind(ops::nonzero(ops::select(expert_mask, 0, e), received), 1);
      top_k_pos = where[0];
      token_idx = where[1];
    }
    current_state = ops::index(hidden_states, token_idx);  // (n, H)
    ops::item(expert_idx);
    Tensor gate_up = layout_.transposed ? ops::mm(current_state, ops::select(gate_up_proj_, 0, e))
                                        : ops::linear(current_state, ops::select(gate_up_proj_, 0, e));  // (n, 2I)
    if (layout_.has_bias) {
      ops::item(expert_idx);
      gate_up = ops::add(gate_up, ops::select(gate_up_proj_bias_, 0, e));
    }
    if (!layout_.has_gate) {
      current_hidden_states = act_fn_.forward(gate_up);
      gate_up = Tensor();
    } else if (!layout_.gpt_oss_gate && !layout_.clamped_halves) {
      const std::vector<Tensor> halves = ops::split(gate_up, gate_up.size(-1) / 2, -1);
      gate = halves[0];
      up = halves[1];
      gate_up = Tensor();
      current_hidden_states = ops::mul(act_fn_.forward(gate), up);  // (n, I)
    } else {
      current_hidden_states = apply_gate(gate_up);
      gate_up = Tensor();
    }
    ops::item(expert_idx);
    current_hidden_states = layout_.transposed ? ops::mm(current_hidden_states, ops::select(down_proj_, 0, e))
                                               : ops::linear(current_hidden_states, ops::select(down_proj_, 0, e));
    if (layout_.has_bias) {
      ops::item(expert_idx);
      current_hidden_states = ops::add(current_hidden_states, ops::select(down_proj_bias_, 0, e));
    }
    // top_k_weights[token_idx, top_k_pos, None]: (n, 1)
    current_hidden_states =
        ops::mul(current_hidden_states, ops::index(ops::unsqueeze(top_k_weights, 2), {token_idx, top_k_pos}));
    ops::index_add_(final_hidden_states, token_idx, ops::to(current_hidden_states, final_hidden_states.dtype()));
  }
  return final_hidden_states;
}

Tensor Experts::grouped_linear(const Tensor& input, const Tensor& weight, const Tensor& offsets, const Tensor& bias) const {
  Tensor out = ops::grouped_mm(input, layout_.transposed ? weight : ops::transpose(weight, -2, -1), offsets);
  if (bias.defined()) ops::add_(out, bias);
  return out;
}

Tensor Experts::apply_gate(const Tensor& gate_up) const {
  if (!layout_.has_gate) return act_fn_.forward(gate_up);  // self.act_fn(proj_out)
  if (layout_.clamped_halves) {
    std::vector<Tensor> halves = ops::chunk(gate_up, 2, -1);
    Tensor gate = ops::clamp(halves[0], std::nullopt, layout_.limit);
    Tensor up = ops::clamp(halves[1], -layout_.limit, layout_.limit);
    return ops::mul(act_fn_.forward(gate), up);
  }
  if (!layout_.gpt_oss_gate) {
    // _default_apply_gate: act(gate) * up on the two halves (views of one storage).
    std::vector<Tensor> halves = ops::split(gate_up, gate_up.size(-1) / 2, -1);
    return ops::mul(act_fn_.forward(halves[0]), halves[1]);
  }
  Tensor gate = ops::slice(gate_up, -1, 0, gate_up.size(-1), 2);
  Tensor up = ops::slice(gate_up, -1, 1, gate_up.size(-1), 2);
  gate = ops::clamp(gate, std::nullopt, layout_.limit);
  up = ops::clamp(up, -layout_.limit, layout_.limit);
  Tensor sigmoid;
  {
    // gate * alpha lives only until the sigmoid has read it.
    sigmoid = ops::sigmoid(ops::mul_number(gate, layout_.alpha));
  }
  Tensor glu = ops::mul(gate, sigmoid);
  sigmoid = Tensor();
  return ops::mul(ops::add(up, 1.0), glu);
}

}  // namespace census::nn
