// File: compressed_attention.h
// The pieces of DeepSeek-V4's attention (transformers/models/deepseek_v4/modeling_deepseek_v4.py,
// Transformers 5) that take plain sizes: its interleaved rotary on the trailing rope slice of a head,
// the grouped output projection, and the key/value compressors of its compressed sparse (CSA) and
// heavily compressed (HCA) layers with the CSA's Lightning indexer.
//
// Legend: B = batch, S = seq_length, H = hidden_size, D = head_dim, Dr = rope width, m = compress rate,
// W = S / m windows (the remainder left out, as the model does without a cache), Hi = index_n_heads,
// Di = index_head_dim, k = min(index_topk, W).
//
// Each apply_trailing_rotary repeats cos and sin to the rope width (repeat_interleave: a new (.., Dr)
// tensor each), and its two multiplies keep those copies: a call saves 2 x (.., Dr) in the cos's dtype.
//
// HcaCompressor (one series, windows of m):
//   kv = kv_proj(x), gate = gate_proj(x)                            (B, S, D)
//   probs = softmax(gate.view(B, W, m, D) + position_bias, dim=2, fp32)    saved (fp32), and its bf16 copy
//   compressed = kv_norm((kv.view(B, W, m, D) * probs).sum(2))       kv and the bf16 probs saved by the product
//   compressed = rotary at positions 0, m, 2m, ...                    (B, 1, W, D)
// CsaCompressor (two series Ca | Cb of D each, overlapping windows of 2m): kv_proj and gate_proj to 2D;
//   new_kv (B, W, 2m, D) zeros and new_gate -inf, filled from the current window's Cb and the
//   previous window's Ca (copies into slices), softmax over the 2m slots; the rest as HCA's, and the
//   indexer's top-k makes the block mask over the compressed entries.
// CompressorIndexer (the CSA's Lightning indexer): its own CSA-style compressor at Di, queries
//   q_b_proj(q_residual) rotated at the token positions, scores relu(q.float() @ K^T.float()) weighted by
//   weights_proj(x) and summed over the heads (B, S, W) fp32, masked causally, top-k. Nothing it returns
//   carries a gradient, so its whole graph, and every tensor it saved, is freed when it returns.
#pragma once

#include <utility>

#include "nn/linear.h"
#include "nn/rms_norm.h"

namespace census::nn {

// DeepseekV4RotaryEmbedding for one rope type ("main" or "compress"): the cos and sin (B, S, Dr/2) of
// `position_ids` (B, S) int64, under no_grad, in x's dtype; the interleaved pairs take one frequency
// each, so nothing is duplicated here.
class InterleavedRotaryEmbedding {
 public:
  // `other_rope_dim`: the module's other rope type, whose inv_freq and original_inv_freq it registers
  // beside this one's and never reads (a compressor's rotary holds the "main" type's too); 0: none.
  explicit InterleavedRotaryEmbedding(int64_t rope_dim, int64_t other_rope_dim = 0);
  std::pair<Tensor, Tensor> forward(const Tensor& x, const Tensor& position_ids) const;
  const Tensor& inv_freq() const { return inv_freq_; }
  // The module's buffers: inv_freq and original_inv_freq of its type, and of the other where it has one.
  const std::vector<Tensor>& buffers() const { return buffers_; }

 private:
  Tensor inv_freq_;  // (Dr/2) fp32
  std::vector<Tensor> buffers_;
};

// DeepSeek-V4's apply_rotary_pos_emb: cos and sin (.., Dr/2) repeated to Dr and unsqueezed at
// `unsqueeze_dim`; the last Dr channels of x rotate in fp32 (x * cos + rotate_half(x) * sin, with
// rotate_half on interleaved pairs: stack((-x2, x1), -1).flatten(-2)), cast back and concatenated
// after the untouched leading channels.
Tensor apply_trailing_rotary(const Tensor& x, const Tensor& cos, const Tensor& sin, int64_t unsqueeze_dim = 1);

// DeepseekV4GroupedLinear: x (.., G, in) times each group's block of the weight (G * out/G, in), one
// bmm over the groups; (.., G, out/G).
class GroupedLinear {
 public:
  GroupedLinear(std::string path, int64_t in_features_per_group, int64_t out_features, int64_t n_groups,
                ParameterList& params);
  Tensor forward(const Tensor& x) const;

 private:
  std::string path_;
  int64_t n_groups_;
  Tensor weight_;  // (out, in_per_group)
};

struct CompressorSizes {
  int64_t hidden_size;
  int64_t head_dim;       // D (the compressor's) or Di (the indexer's)
  int64_t compress_rate;  // m
  int64_t rope_dim;       // Dr
  double rms_norm_eps;
  int64_t main_rope_dim = 0;  // the "main" rope's width, whose buffers the compressor's rotary also holds
};

struct CompressedKv {
  Tensor compressed_kv;  // (B, 1, W, D)
  Tensor block_bias;     // (B, 1, S, W) in the compressed entries' dtype, or undefined
};

class HcaCompressor {
 public:
  HcaCompressor(std::string path, CompressorSizes sizes, ParameterList& params);
  CompressedKv forward(const Tensor& hidden_states, const Tensor& position_ids) const;
  const std::vector<Tensor>& buffers() const { return rotary_emb.buffers(); }

 private:
  std::string path_;
  CompressorSizes sizes_;
  Linear kv_proj;    // H -> D
  Linear gate_proj;  // H -> D
  Tensor position_bias_;  // (m, D)
  LlamaRMSNorm kv_norm;
  InterleavedRotaryEmbedding rotary_emb;
};

// The overlapping-window compression CSA's compressor and its indexer share: kv and gate (B, S, 2D) to
// the normalized, rotated compressed entries (B, W, D).
Tensor compress_overlapping(const Tensor& kv, const Tensor& gate, const Tensor& position_bias, const LlamaRMSNorm& kv_norm,
                            const InterleavedRotaryEmbedding& rotary_emb, const CompressorSizes& sizes);

struct CompressorIndexerSizes {
  int64_t q_lora_rank;
  int64_t n_heads;  // Hi
  int64_t topk;
};

class CompressorIndexer {
 public:
  CompressorIndexer(std::string path, CompressorSizes sizes, CompressorIndexerSizes indexer, ParameterList& params);
  // The top-k compressed entries of each query (B, S, k) int64, -1 where an entry is not yet causal.
  Tensor forward(const Tensor& hidden_states, const Tensor& q_residual, const Tensor& position_ids) const;
  const std::vector<Tensor>& buffers() const { return rotary_emb.buffers(); }

 private:
  std::string path_;
  std::string scorer_path_;  // path_ + ".scorer": a module's path must outlive the census that records it
  CompressorSizes sizes_;
  CompressorIndexerSizes indexer_;
  Linear kv_proj;    // H -> 2Di
  Linear gate_proj;  // H -> 2Di
  Tensor position_bias_;  // (m, 2Di)
  LlamaRMSNorm kv_norm;
  Linear q_b_proj;   // Rq -> Hi*Di
  InterleavedRotaryEmbedding rotary_emb;
  Linear weights_proj;  // scorer.weights_proj: H -> Hi
};

class CsaCompressor {
 public:
  CsaCompressor(std::string path, CompressorSizes sizes, CompressorSizes indexer_sizes, CompressorIndexerSizes indexer,
                ParameterList& params);
  CompressedKv forward(const Tensor& hidden_states, const Tensor& q_residual, const Tensor& position_ids) const;
  // Its rotary's buffers, then its indexer's.
  std::vector<Tensor> buffers() const;

 private:
  std::string path_;
  CompressorSizes sizes_;
  Linear kv_proj;    // H -> 2D
  Linear gate_proj;  // H -> 2D
  Tensor position_bias_;  // (m, 2D)
  LlamaRMSNorm kv_norm;
  InterleavedRotaryEmbedding rotary_emb;
  CompressorIndexer indexer;
};

}  // namespace census::nn
