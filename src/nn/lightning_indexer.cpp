#include "nn/lightning_indexer.h"

#include "ops/layer_norm.h"
#include "ops/ops.h"

namespace census::nn {

LightningIndexer::LightningIndexer(std::string path, const IndexerSizes& s, ParameterList& params)
    : path_(std::move(path)),
      sizes_(s),
      wq_b(path_ + ".wq_b", s.q_lora_rank, s.n_heads * s.head_dim, false, params),
      wk(path_ + ".wk", s.hidden_size, s.head_dim, false, params),
      k_norm_path_(path_ + ".k_norm"),
      k_norm_weight_(register_parameter(params, k_norm_path_, "weight", Dims{s.head_dim})),
      k_norm_bias_(register_parameter(params, k_norm_path_, "bias", Dims{s.head_dim})),
      weights_proj(path_ + ".weights_proj", s.hidden_size, s.n_heads, false, params) {}

Tensor LightningIndexer::forward(const Tensor& hidden_states, const Tensor& q_resid,
                                 const PositionEmbeddings& positions) const {
  ModuleScope scope(path_, ModuleKind::kOther);
  NoGradGuard no_grad;  // @torch.no_grad()
  const int64_t batch = hidden_states.size(0), seq = hidden_states.size(1);
  const int64_t rope = sizes_.qk_rope_head_dim, rest = sizes_.head_dim - rope;
  Tensor q = wq_b.forward(q_resid);
  q = ops::view(q, Dims{batch, seq, sizes_.n_heads, sizes_.head_dim});
  Tensor q_rot, q_pass;
  {
    std::vector<Tensor> parts = ops::split_with_sizes(q, {rope, rest}, -1);
    q_rot = parts[0];
    q_pass = parts[1];
  }
  Tensor k;
  {
    Tensor projected = wk.forward(hidden_states);
    ModuleScope norm(k_norm_path_, ModuleKind::kNorm);
    k = ops::layer_norm(projected, k_norm_weight_, k_norm_bias_);
  }
  k = ops::unsqueeze(k, 2);  // (B, S, 1, Di)
  Tensor k_rot, k_pass;
  {
    std::vector<Tensor> parts = ops::split_with_sizes(k, {rope, rest}, -1);
    k_rot = parts[0];
    k_pass = parts[1];
  }
  if (sizes_.rope_interleave) {
    auto [q_embed, k_embed] = apply_rotary_pos_emb_interleave(q_rot, k_rot, positions.cos, positions.sin, 2);
    q_rot = q_embed;
    k_rot = k_embed;
  } else {
    // apply_rotary_pos_emb(..., unsqueeze_dim=2): cos and sin gain the heads' dim of (B, S, heads, Dr).
    const Tensor cos = ops::unsqueeze(positions.cos, 2), sin = ops::unsqueeze(positions.sin, 2);
    auto rotate = [&](const Tensor& x) { return ops::add(ops::mul(x, cos), ops::mul(rotate_half(x), sin)); };
    q_rot = rotate(q_rot);
    k_rot = rotate(k_rot);
  }
  q = ops::cat({q_rot, q_pass}, -1);
  k = ops::squeeze(ops::cat({k_rot, k_pass}, -1), 2);  // (B, S, Di)
  q_rot = q_pass = k_rot = k_pass = Tensor();

  Tensor scores = ops::matmul(ops::to(q, DType::kFloat32), ops::unsqueeze(ops::to(ops::transpose(k, -1, -2), DType::kFloat32), 1));
  scores = ops::mul_number(scores, 1.0);  // * softmax_scale
  scores = ops::relu(scores);

  Tensor weights = ops::mul_number(ops::to(weights_proj.forward(hidden_states), DType::kFloat32), 1.0);  // * Hi^-0.5
  Tensor index_scores = ops::squeeze(ops::matmul(ops::unsqueeze(weights, -2), scores), -2);  // (B, S, T)

  // No attention mask under the flash path: the causal mask from the key positions.
  const Tensor key_positions = ops::arange(index_scores.size(-1));
  const Tensor causal = ops::gt(ops::unsqueeze(ops::unsqueeze(key_positions, 0), 0),
                                ops::unsqueeze(positions.position_ids, 2));  // (B, S, T) bool
  index_scores = ops::masked_fill(index_scores, causal);

  const int64_t topk = std::min(sizes_.topk, index_scores.size(-1));
  return ops::to(ops::topk(index_scores, topk).indices, DType::kInt32);
}

}  // namespace census::nn
