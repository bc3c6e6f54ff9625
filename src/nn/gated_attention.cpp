#include "nn/gated_attention.h"

#include "ops/ops.h"

namespace census::nn {

Qwen3NextAttention::Qwen3NextAttention(const AttentionSizes& c, KernelProfile kernels, ParameterList& params)
    : kernels_(kernels),
      head_dim_(c.head_dim),
      q_proj("self_attn.q_proj", c.hidden_size, c.num_attention_heads * c.head_dim * 2, c.qkv_bias, params),
      k_proj("self_attn.k_proj", c.hidden_size, c.num_key_value_heads * c.head_dim, c.qkv_bias, params),
      v_proj("self_attn.v_proj", c.hidden_size, c.num_key_value_heads * c.head_dim, c.qkv_bias, params),
      o_proj("self_attn.o_proj", c.num_attention_heads * c.head_dim, c.hidden_size, c.o_bias, params),
      q_norm("self_attn.q_norm", c.head_dim, c.rms_norm_eps, params),
      k_norm("self_attn.k_norm", c.head_dim, c.rms_norm_eps, params) {}


Tensor Qwen3NextAttention::forward(const Tensor& hidden_states, const PositionEmbeddings& positions) const {
  ModuleScope scope(path_, ModuleKind::kOther);
  const int64_t batch = hidden_states.size(0), seq = hidden_states.size(1);
  // query_states, gate = torch.chunk(q_proj(x).view(1, S, -1, 2D), 2, dim=-1): strided views
  Tensor q = q_proj.forward(hidden_states);
  q = ops::view(q, Dims{batch, seq, q.size(-1) / (2 * head_dim_), 2 * head_dim_});
  std::vector<Tensor> query_gate = ops::chunk(q, 2, -1);
  q = Tensor();
  Tensor gate = ops::reshape(query_gate[1], Dims{batch, seq, query_gate[1].size(2) * head_dim_});  // a copy
  Tensor query_states = ops::view(query_gate[0], query_gate[0].sizes());
  query_gate.clear();
  query_states = ops::transpose(q_norm.forward(query_states), 1, 2);  // (1, N, S, D)
  Tensor k = k_proj.forward(hidden_states);
  k = ops::view(k, Dims{batch, seq, k.size(-1) / head_dim_, head_dim_});
  Tensor key_states = ops::transpose(k_norm.forward(k), 1, 2);  // (1, Nkv, S, D)
  k = Tensor();
  Tensor v = v_proj.forward(hidden_states);
  Tensor value_states = ops::transpose(ops::view(v, Dims{batch, seq, v.size(-1) / head_dim_, head_dim_}), 1, 2);
  v = Tensor();

  auto [q_embed, k_embed] = apply_partial_rotary_pos_emb(query_states, key_states, positions.cos, positions.sin);
  query_states = q_embed;
  key_states = k_embed;
  Tensor attn_output = flash_attention_forward(query_states, key_states, value_states, kernels_);  // (1, S, N, D)
  query_states = key_states = value_states = Tensor();
  attn_output = ops::contiguous(ops::reshape(attn_output, Dims{batch, seq, attn_output.size(2) * attn_output.size(3)}));
  attn_output = ops::mul(attn_output, ops::sigmoid(gate));  // the output gate: both operands saved
  gate = Tensor();
  return o_proj.forward(attn_output);
}

}  // namespace census::nn
