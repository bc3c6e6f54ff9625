// File: rotary.h
// Rotary position embeddings. The model computes cos and sin once per forward, under no_grad, and
// hands them to every layer; each layer's attention rotates its queries and keys with them.
//
//   inv_freq (D/2) fp32, a buffer of the rotary module: a census counts it once an op hands it on
//   cos, sin (1, S, D) in the activations' dtype, saved by the layer's rotation muls
#pragma once

#include "nn/module.h"

namespace census::nn {

struct PositionEmbeddings {
  Tensor position_ids;  // (1, S) int64
  Tensor cos;           // (1, S, D)
  Tensor sin;           // (1, S, D)
  // DeepSeek-V4's second rope type ("compress"), beside cos and sin ("main"): (1, S, Dr/2) each.
  Tensor compress_cos;
  Tensor compress_sin;
};

class RotaryEmbedding {
 public:
  // `halves`: cos and sin D/2 wide, the frequencies not repeated (GPT-OSS rotates the two halves).
  // `fp32`: cos and sin kept in fp32, not cast to the activations' dtype (ERNIE-4.5).
  explicit RotaryEmbedding(int64_t rotary_dim, bool halves = false, bool fp32 = false);
  // The embeddings of positions 0..S-1 for `hidden` (1, S, H), as the model computes them.
  PositionEmbeddings forward(const Tensor& hidden) const;
  const Tensor& inv_freq() const { return inv_freq_; }

 private:
  Tensor inv_freq_;  // (D/2) fp32
  bool halves_;
  bool fp32_;
};

// The rotary of Qwen3-VL's and Qwen3.5's text models (Qwen3VLTextRotaryEmbedding,
// Qwen3_5TextRotaryEmbedding): a text token's position on three grids (T, H, W), each its index, taken
// per grid and per sequence before apply_interleaved_mrope keeps one (B, S, D/2) set; so cos and sin
// are (B, S, D), one per sequence of the micro-batch, where Llama's are (1, S, D).
class MultiGridRotaryEmbedding {
 public:
  explicit MultiGridRotaryEmbedding(int64_t rotary_dim);
  PositionEmbeddings forward(const Tensor& hidden) const;
  const Tensor& inv_freq() const { return inv_freq_; }

 private:
  Tensor inv_freq_;  // (D/2) fp32
};

// rotate_half(x) = cat(-x[..., D/2:], x[..., :D/2])
Tensor rotate_half(const Tensor& x);
// (q * cos) + (rotate_half(q) * sin), and the same for k; cos and sin unsqueezed on the head dim.
std::pair<Tensor, Tensor> apply_rotary_pos_emb(const Tensor& q, const Tensor& k, const Tensor& cos, const Tensor& sin);
// DeepSeek's rotary on interleaved pairs (x0, x1), (x2, x3), ...: the even and odd elements rotated
// by the first half of cos and sin, concatenated.
// GPT-OSS's rotary: x split in two halves (chunk), cat(x1 * cos - x2 * sin, x2 * cos + x1 * sin) with
// cos and sin D/2 wide.
std::pair<Tensor, Tensor> apply_rotary_pos_emb_halves(const Tensor& q, const Tensor& k, const Tensor& cos,
                                                      const Tensor& sin);
// `unsqueeze_dim`: where cos and sin gain the heads' dim (1 for (B, N, S, D), 2 for (B, S, N, D)).
std::pair<Tensor, Tensor> apply_rotary_pos_emb_interleave(const Tensor& q, const Tensor& k, const Tensor& cos,
                                                          const Tensor& sin, int64_t unsqueeze_dim = 1);

// apply_rotary_pos_emb with a partial rotary: the first rotary_dim channels of each head (cos's
// width) rotate, the rest pass through, and the two are concatenated back.
std::pair<Tensor, Tensor> apply_partial_rotary_pos_emb(const Tensor& q, const Tensor& k, const Tensor& cos,
                                                       const Tensor& sin);

}  // namespace census::nn
