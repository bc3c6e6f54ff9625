#include "nn/rotary.h"

#include "ops/ops.h"

namespace census::nn {

RotaryEmbedding::RotaryEmbedding(int64_t rotary_dim, bool halves, bool fp32)
    : inv_freq_(make_tensor(Dims{rotary_dim / 2}, DType::kFloat32)), halves_(halves), fp32_(fp32) {}

PositionEmbeddings RotaryEmbedding::forward(const Tensor& hidden) const {
  const int64_t seq = hidden.size(1);
  PositionEmbeddings out;
  out.position_ids = ops::unsqueeze(ops::arange(seq), 0);
  NoGradGuard no_grad;
  // inv_freq[None, :, None] @ position_ids[:, None, :].float(): (1, D/2, S) fp32. The product is a
  // batched matmul in the model; a broadcast multiply allocates the same bytes.
  Tensor inv_freq_expanded = ops::unsqueeze(ops::unsqueeze(inv_freq_, 0), 2);
  Tensor position_ids_expanded = ops::to(ops::unsqueeze(out.position_ids, 1), DType::kFloat32);
  Tensor freqs = ops::transpose(ops::mul(inv_freq_expanded, position_ids_expanded), 1, 2);
  Tensor emb = halves_ ? freqs : ops::cat({freqs, freqs}, -1);  // (1, S, D) fp32, or (1, S, D/2)
  const double attention_scaling = 1.0;       // scales values only, never shapes
  Tensor cos = ops::mul(ops::cos(emb), attention_scaling);
  Tensor sin = ops::mul(ops::sin(emb), attention_scaling);
  out.cos = fp32_ ? cos : ops::to(cos, hidden.dtype());
  out.sin = fp32_ ? sin : ops::to(sin, hidden.dtype());
  return out;
}

MultiGridRotaryEmbedding::MultiGridRotaryEmbedding(int64_t rotary_dim)
    : inv_freq_(make_tensor(Dims{rotary_dim / 2}, DType::kFloat32)) {}

PositionEmbeddings MultiGridRotaryEmbedding::forward(const Tensor& hidden) const {
  const int64_t batch = hidden.size(0), seq = hidden.size(1), half = inv_freq_.size(0);
  PositionEmbeddings out;
  // The model's position_ids: arange(S) viewed (1, 1, S) and expanded to the grids and the sequences.
  out.position_ids = ops::unsqueeze(ops::arange(seq), 0);
  NoGradGuard no_grad;
  // position_ids[:, :, None, :].float(): (3, B, 1, S) fp32, made whole from the expanded view.
  const Tensor grid_positions =
      ops::to(ops::expand(ops::view(out.position_ids, Dims{1, 1, 1, seq}), Dims{3, batch, 1, seq}), DType::kFloat32);
  // inv_freq[None, None, :, None].expand(3, B, -1, 1) @ the positions: (3, B, D/2, S) fp32, transposed; a
  // broadcast multiply allocates the bytes the batched matmul does.
  const Tensor inv_freq_expanded = ops::expand(ops::view(inv_freq_, Dims{1, 1, half, 1}), Dims{3, batch, half, 1});
  const Tensor freqs = ops::transpose(ops::mul(inv_freq_expanded, grid_positions), 2, 3);
  // apply_interleaved_mrope: freqs[0], its H and W sections overwritten in place from the other grids.
  const Tensor freqs_t = ops::select(freqs, 0, 0);                // (B, S, D/2)
  const Tensor emb = ops::cat({freqs_t, freqs_t}, -1);            // (B, S, D) fp32
  const double attention_scaling = 1.0;                            // scales values only, never shapes
  const Tensor cos = ops::mul(ops::cos(emb), attention_scaling);
  const Tensor sin = ops::mul(ops::sin(emb), attention_scaling);
  out.cos = ops::to(cos, hidden.dtype());
  out.sin = ops::to(sin, hidden.dtype());
  return out;
}

Tensor rotate_half(const Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  Tensor x1 = ops::slice(x, -1, 0, half);
  Tensor x2 = ops::slice(x, -1, half, x.size(-1));
  return ops::cat({ops::neg(x2), x1}, -1);
}

std::pair<Tensor, Tensor> apply_rotary_pos_emb(const Tensor& q, const Tensor& k, const Tensor& cos_in,
                                               const Tensor& sin_in) {
  Tensor cos = ops::unsqueeze(cos_in, 1);
  Tensor sin = ops::unsqueeze(sin_in, 1);
  auto embed = [&](const Tensor& x) {
    Tensor rotated = ops::mul(x, cos);
    return ops::add(rotated, ops::mul(rotate_half(x), sin));
  };
  Tensor q_embed = embed(q);
  Tensor k_embed = embed(k);
  return {q_embed, k_embed};
}



namespace {

// cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin]); each half's two products die once it is formed.
Tensor rotate_pairs(const Tensor& x1, const Tensor& x2, const Tensor& cos, const Tensor& sin) {
  Tensor first, second;
  {
    Tensor a = ops::mul(x1, cos);
    Tensor b = ops::mul(x2, sin);
    first = ops::sub(a, b);
  }
  {
    Tensor a = ops::mul(x2, cos);
    Tensor b = ops::mul(x1, sin);
    second = ops::add(a, b);
  }
  return ops::cat({first, second}, -1);
}

}  // namespace

std::pair<Tensor, Tensor> apply_rotary_pos_emb_halves(const Tensor& q, const Tensor& k, const Tensor& cos_in,
                                                      const Tensor& sin_in) {
  const Tensor cos = ops::unsqueeze(cos_in, 1);
  const Tensor sin = ops::unsqueeze(sin_in, 1);
  auto embed = [&](const Tensor& x) {
    std::vector<Tensor> halves = ops::split(x, x.size(-1) / 2, -1);  // torch.chunk(x, 2, dim=-1)
    return rotate_pairs(halves[0], halves[1], cos, sin);
  };
  Tensor q_embed = embed(q);
  Tensor k_embed = embed(k);
  return {q_embed, k_embed};
}

std::pair<Tensor, Tensor> apply_rotary_pos_emb_interleave(const Tensor& q, const Tensor& k, const Tensor& cos_in,
                                                          const Tensor& sin_in, int64_t unsqueeze_dim) {
  const int64_t half = cos_in.size(-1) / 2;
  const Tensor cos = ops::unsqueeze(ops::slice(cos_in, -1, 0, half), unsqueeze_dim);
  const Tensor sin = ops::unsqueeze(ops::slice(sin_in, -1, 0, half), unsqueeze_dim);
  // The even and odd elements (strided views), the queries' and keys' taken before either rotates.
  const Tensor q1 = ops::slice(q, -1, 0, q.size(-1), 2);
  const Tensor q2 = ops::slice(q, -1, 1, q.size(-1), 2);
  const Tensor k1 = ops::slice(k, -1, 0, k.size(-1), 2);
  const Tensor k2 = ops::slice(k, -1, 1, k.size(-1), 2);
  Tensor q_embed = rotate_pairs(q1, q2, cos, sin);
  Tensor k_embed = rotate_pairs(k1, k2, cos, sin);
  return {q_embed, k_embed};
}

// apply_rotary_pos_emb with a partial rotary: the first rotary_dim channels of each head rotate, the
// rest pass through, and the two are concatenated back.
std::pair<Tensor, Tensor> apply_partial_rotary_pos_emb(const Tensor& q, const Tensor& k, const Tensor& cos_in,
                                                       const Tensor& sin_in) {
  const Tensor cos = ops::unsqueeze(cos_in, 1);
  const Tensor sin = ops::unsqueeze(sin_in, 1);
  const int64_t rotary_dim = cos.size(-1), head_dim = q.size(-1);
  // q[..., :rotary_dim] of the whole width is q itself (no op); q[..., rotary_dim:] is a view, maybe empty.
  auto rotated_part = [&](const Tensor& x) { return rotary_dim < head_dim ? ops::slice(x, -1, 0, rotary_dim) : x; };
  const Tensor q_rot = rotated_part(q), q_pass = ops::slice(q, -1, rotary_dim, head_dim);
  const Tensor k_rot = rotated_part(k), k_pass = ops::slice(k, -1, rotary_dim, head_dim);
  auto embed = [&](const Tensor& x) {
    Tensor rotated = ops::mul(x, cos);
    Tensor half = ops::mul(rotate_half(x), sin);
    return ops::add(rotated, half);
  };
  Tensor q_embed = embed(q_rot);
  Tensor k_embed = embed(k_rot);
  q_embed = ops::cat({q_embed, q_pass}, -1);
  k_embed = ops::cat({k_embed, k_pass}, -1);
  return {q_embed, k_embed};
}

}  // namespace census::nn
