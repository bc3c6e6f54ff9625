#include "nn/hyperparallel.h"

#include "ops/ops.h"

namespace census::nn {

FusedRMSNorm::FusedRMSNorm(std::string path, int64_t dim, ParameterList& params)
    : path_(std::move(path)), weight_(register_parameter(params, path_, "weight", Dims{dim})) {}

Tensor FusedRMSNorm::forward(const Tensor& x) const {
  ModuleScope scope(path_, ModuleKind::kNorm);
  return ops::npu_rms_norm(x, weight_).y;  // the kernel's rstd lives on in its node
}

GQAAttention::GQAAttention(int64_t hidden_size, int64_t num_heads, int64_t num_kv_heads, int64_t head_dim,
                           bool qkv_bias, bool o_bias, bool qk_norm, double rms_norm_eps, ParameterList& params)
    : num_heads_(num_heads),
      num_kv_heads_(num_kv_heads),
      head_dim_(head_dim),
      linear_qkv("self_attn.linear_qkv", hidden_size, num_kv_heads * (num_heads / num_kv_heads + 2) * head_dim, qkv_bias,
                 params),
      o_proj("self_attn.o_proj", num_heads * head_dim, hidden_size, o_bias, params) {
  if (qk_norm) {
    q_norm.emplace("self_attn.q_norm", head_dim, rms_norm_eps, params);
    k_norm.emplace("self_attn.k_norm", head_dim, rms_norm_eps, params);
  }
}

Tensor GQAAttention::forward(const Tensor& hidden_states, const PositionEmbeddings& positions) const {
  ModuleScope scope(path_, ModuleKind::kOther);
  const int64_t batch = hidden_states.size(0), seq = hidden_states.size(1);
  const int64_t groups = num_heads_ / num_kv_heads_;
  Tensor qkv_states = ops::view(linear_qkv.forward(hidden_states), Dims{batch, seq, num_kv_heads_, (groups + 2) * head_dim_});
  Tensor query_states, key_states, value_states;
  {
    std::vector<Tensor> parts = ops::split_with_sizes(qkv_states, {groups * head_dim_, head_dim_, head_dim_}, -1);
    query_states = parts[0];
    key_states = parts[1];
    value_states = parts[2];
  }
  // (B, S, Nkv, gD) -> (B, S, Nh, D): no view of the strided slice can say it, so a copy.
  query_states = ops::reshape(query_states, Dims{batch, seq, num_heads_, head_dim_});
  if (q_norm) query_states = q_norm->forward(query_states);
  if (k_norm) key_states = k_norm->forward(key_states);
  {
    // apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=2): npu_rotary_mul on clones, in BSND.
    const Tensor cos = ops::unsqueeze(positions.cos, 2);
    const Tensor sin = ops::unsqueeze(positions.sin, 2);
    Tensor q_embed = ops::npu_rotary_mul(ops::clone(query_states), cos, sin);
    Tensor k_embed = ops::npu_rotary_mul(ops::clone(key_states), cos, sin);
    query_states = q_embed;
    key_states = k_embed;
  }
  query_states = ops::transpose(query_states, 1, 2);
  key_states = ops::transpose(key_states, 1, 2);
  value_states = ops::transpose(value_states, 1, 2);
  // run_qwen3_moe_flash_attention: the compressed causal mask is cached once per device, no layer's.
  Tensor attn_output =
      ops::contiguous(ops::transpose(ops::flash_attention(query_states, key_states, value_states, Op::kNpuFusionAttention).out, 1, 2));
  attn_output = ops::contiguous(ops::reshape(attn_output, Dims{batch, seq, attn_output.size(2) * attn_output.size(3)}));
  return o_proj.forward(attn_output);
}

GroupedExperts::GroupedExperts(std::string path, int64_t num_experts, int64_t hidden_size, int64_t intermediate_size,
                               ParameterList& params)
    : path_(std::move(path)),
      num_experts_(num_experts),
      gate_up_proj_(register_parameter(params, path_, "gate_up_proj", Dims{num_experts, hidden_size, 2 * intermediate_size})),
      down_proj_(register_parameter(params, path_, "down_proj", Dims{num_experts, intermediate_size, hidden_size})) {}

Tensor GroupedExperts::forward(const Tensor& hidden_states, const Tensor& top_k_index, const Tensor& top_k_weights) const {
  ModuleScope scope(path_, ModuleKind::kOther);
  const Dims hidden_shape = hidden_states.sizes();
  const Tensor hidden_states_flat = ops::view(hidden_states, Dims{hidden_states.numel() / hidden_states.size(-1), hidden_states.size(-1)});
  auto [permuted_tokens, sorted_indices] = ops::npu_moe_token_permute(hidden_states_flat, top_k_index);
  const Tensor flatten_probs = ops::view(top_k_weights, Dims{top_k_weights.numel()});
  // Unused where the router's weights apply at the unpermute (router_gating_in_fp32): its graph dies
  // with the forward.
  const Tensor permuted_probs = ops::index_select(flatten_probs, sorted_indices);
  Tensor tokens_per_expert;
  {
    const Tensor counts = ops::histc(ops::to(ops::view(top_k_index, Dims{top_k_index.numel()}), DType::kFloat32), num_experts_);
    tokens_per_expert = ops::to(counts, DType::kInt64);  // .long()
  }
  // forward_expert_major -> _grouped_gemm_expert_forward
  tokens_per_expert_gmm_ = tokens_per_expert;
  group_list_ = ops::cumsum(tokens_per_expert_gmm_, 0);
  Tensor fc1_output = ops::npu_grouped_matmul(permuted_tokens, gate_up_proj_, group_list_);  // (S, 2I)
  fc1_output = ops::npu_swiglu(fc1_output);                                                // (S, I)
  const Tensor fc2_output = ops::npu_grouped_matmul(fc1_output, down_proj_, group_list_);  // (S, H)
  Tensor output = ops::npu_moe_token_unpermute(fc2_output, sorted_indices, top_k_weights);
  return ops::view(output, hidden_shape);
}

}  // namespace census::nn
