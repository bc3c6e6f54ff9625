#include "nn/latent_attention.h"

#include "ops/ops.h"

namespace census::nn {
namespace {

template <class Module, class... Args>
std::optional<Module> built_if(bool condition, Args&&... args) {
  if (!condition) return std::nullopt;
  return std::optional<Module>(std::in_place, std::forward<Args>(args)...);
}

// DeepseekV3RMSNorm(q_lora_rank) and (kv_lora_rank) take the class's default eps, not rms_norm_eps.
constexpr double kLatentNormEps = 1e-6;

}  // namespace

DeepseekV3Attention::DeepseekV3Attention(int64_t hidden, int64_t heads, const MlaSizes& mla, bool qkv_bias,
                                         bool o_bias, KernelProfile kernels, ParameterList& params)
    : kernels_(kernels),
      mla_(mla),
      q_proj(built_if<Linear>(mla.q_lora_rank == 0, "self_attn.q_proj", hidden,
                                  heads * (mla.qk_nope_head_dim + mla.qk_rope_head_dim), false,
                                  params)),
      q_a_proj(built_if<Linear>(mla.q_lora_rank > 0, "self_attn.q_a_proj", hidden, mla.q_lora_rank,
                                    qkv_bias, params)),
      q_a_layernorm(built_if<LlamaRMSNorm>(mla.q_lora_rank > 0, "self_attn.q_a_layernorm", mla.q_lora_rank,
                                               kLatentNormEps, params)),
      q_b_proj(built_if<Linear>(mla.q_lora_rank > 0, "self_attn.q_b_proj", mla.q_lora_rank,
                                    heads * (mla.qk_nope_head_dim + mla.qk_rope_head_dim), false,
                                    params)),
      kv_a_proj_with_mqa("self_attn.kv_a_proj_with_mqa", hidden, mla.kv_lora_rank + mla.qk_rope_head_dim,
                         qkv_bias, params),
      kv_a_layernorm("self_attn.kv_a_layernorm", mla.kv_lora_rank, kLatentNormEps, params),
      kv_b_proj("self_attn.kv_b_proj", mla.kv_lora_rank,
                heads * (mla.qk_nope_head_dim + mla.v_head_dim), false, params),
      o_proj("self_attn.o_proj", heads * mla.v_head_dim, hidden, o_bias, params) {}

// Locals are declared in the order Python binds them: at return C++ drops them in the order the
// interpreter clears the frame, so the storages nothing saved are freed in PyTorch's order.
Tensor DeepseekV3Attention::forward(const Tensor& hidden_states, const PositionEmbeddings& positions) const {
  ModuleScope scope(path_, ModuleKind::kOther);
  const int64_t batch = hidden_states.size(0), seq = hidden_states.size(1);
  const int64_t qk_head_dim = mla_.qk_nope_head_dim + mla_.qk_rope_head_dim;

  Tensor q_states = q_proj ? q_proj->forward(hidden_states)
                           : q_b_proj->forward(q_a_layernorm->forward(q_a_proj->forward(hidden_states)));
  q_states = ops::transpose(ops::view(q_states, Dims{batch, seq, q_states.size(-1) / qk_head_dim, qk_head_dim}), 1, 2);
  Tensor q_pass, q_rot;  // (B, N, S, Dn), (B, N, S, Dr): views of q_states
  {
    std::vector<Tensor> parts = ops::split_with_sizes(q_states, {mla_.qk_nope_head_dim, mla_.qk_rope_head_dim}, -1);
    q_pass = parts[0];
    q_rot = parts[1];
  }
  Tensor compressed_kv = kv_a_proj_with_mqa.forward(hidden_states);  // (B, S, Rkv + Dr)
  Tensor kv_nope, k_rot;
  {
    std::vector<Tensor> parts = ops::split_with_sizes(compressed_kv, {mla_.kv_lora_rank, mla_.qk_rope_head_dim}, -1);
    kv_nope = parts[0];
    k_rot = parts[1];
  }
  kv_nope = kv_a_layernorm.forward(kv_nope);  // its fp32 upcast copies the strided slice
  kv_nope = ops::view(kv_nope, Dims{batch, 1, seq, mla_.kv_lora_rank});
  k_rot = ops::view(k_rot, Dims{batch, 1, seq, mla_.qk_rope_head_dim});

  {
    auto [q_embed, k_embed] = mla_.rope_interleave
                                  ? apply_rotary_pos_emb_interleave(q_rot, k_rot, positions.cos, positions.sin)
                                  : apply_rotary_pos_emb(q_rot, k_rot, positions.cos, positions.sin);
    q_rot = q_embed;
    k_rot = k_embed;
  }

  Tensor query_states = ops::cat({q_pass, q_rot}, -1);  // (B, N, S, Dqk)
  auto [key_states, value_states] = expand_kv(kv_nope, k_rot);

  // The kernel takes values of their own width (Dv); its output is (B, S, N, Dv).
  Tensor attn_output = flash_attention_forward(query_states, key_states, value_states, kernels_);
  attn_output = ops::contiguous(ops::reshape(attn_output, Dims{batch, seq, attn_output.size(2) * attn_output.size(3)}));
  attn_output = o_proj.forward(attn_output);
  return attn_output;
}

std::pair<Tensor, Tensor> DeepseekV3Attention::expand_kv(const Tensor& latent, const Tensor& rotary_key) const {
  const int64_t batch = latent.size(0), seq = latent.size(2);
  const int64_t width = mla_.qk_nope_head_dim + mla_.v_head_dim;
  Tensor kv_nope = kv_b_proj.forward(latent);  // (B, 1, S, N*(Dn + Dv))
  kv_nope = ops::transpose(ops::view(kv_nope, Dims{batch, seq, kv_nope.size(-1) / width, width}), 1, 2);
  Tensor k_nope, value_states;
  {
    std::vector<Tensor> parts = ops::split_with_sizes(kv_nope, {mla_.qk_nope_head_dim, mla_.v_head_dim}, -1);
    k_nope = parts[0];
    value_states = parts[1];
  }
  const int64_t heads = k_nope.size(1);
  Tensor k_rot = ops::expand(rotary_key, Dims{batch, heads, seq, mla_.qk_rope_head_dim});  // no storage
  // new_empty, then key_states[..., :Dn].copy_(k_nope) and key_states[..., Dn:].copy_(k_rot): the
  // key's history is two CopySlices (Note [Indexed assignment]).
  Tensor key_states = ops::new_empty(kv_nope, Dims{batch, heads, seq, mla_.qk_nope_head_dim + mla_.qk_rope_head_dim});
  ops::assign_index(key_states, {ops::IndexStep{false, 3, 0, mla_.qk_nope_head_dim}}, k_nope);
  ops::assign_index(key_states, {ops::IndexStep{false, 3, mla_.qk_nope_head_dim, key_states.size(-1)}}, k_rot);
  return {key_states, value_states};
}

}  // namespace census::nn
