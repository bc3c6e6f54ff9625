#include "nn/compressed_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/ops.h"

namespace census::nn {
namespace {

constexpr double kMinusInfinity = -std::numeric_limits<double>::infinity();

// rotate_half on interleaved pairs: stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2).
Tensor rotate_half_interleaved(const Tensor& x) {
  const int64_t width = x.size(-1);
  const Tensor x1 = ops::slice(x, -1, 0, width, 2);
  const Tensor x2 = ops::slice(x, -1, 1, width, 2);
  Tensor stacked = ops::stack({ops::neg(x2), x1}, -1);
  return ops::reshape(stacked, x.sizes());
}

// The window starts i * m (+ 0: no cache, so no earlier windows), expanded over the batch: (B, W) int64.
Tensor window_positions(int64_t batch, int64_t windows, int64_t rate) {
  Tensor positions = ops::add(ops::mul_number(ops::arange(windows), static_cast<double>(rate)), 0.0);
  return ops::expand(ops::unsqueeze(positions, 0), Dims{batch, windows});
}

// (position_ids + 1) // m: how many compressed entries each query may see.
Tensor causal_threshold(const Tensor& position_ids, int64_t rate) {
  return ops::floor_divide(ops::add(position_ids, 1.0), rate);
}

Tensor rotate_compressed(const Tensor& compressed, const InterleavedRotaryEmbedding& rotary_emb, int64_t rate) {
  const int64_t batch = compressed.size(0), windows = compressed.size(1);
  const Tensor positions = window_positions(batch, windows, rate);
  auto [cos, sin] = rotary_emb.forward(compressed, positions);
  return ops::squeeze(apply_trailing_rotary(ops::unsqueeze(compressed, 1), cos, sin), 1);
}

}  // namespace

InterleavedRotaryEmbedding::InterleavedRotaryEmbedding(int64_t rope_dim, int64_t other_rope_dim)
    : inv_freq_(make_tensor(Dims{rope_dim / 2}, DType::kFloat32)) {
  buffers_ = {inv_freq_, make_tensor(inv_freq_.sizes(), DType::kFloat32)};
  if (other_rope_dim > 0)
    for (int copy = 0; copy < 2; ++copy) buffers_.push_back(make_tensor(Dims{other_rope_dim / 2}, DType::kFloat32));
}

std::pair<Tensor, Tensor> InterleavedRotaryEmbedding::forward(const Tensor& x, const Tensor& position_ids) const {
  NoGradGuard no_grad;
  const int64_t batch = position_ids.size(0);
  // inv_freq[None, :, None].expand(B, -1, 1) @ position_ids[:, None, :].float(): (B, Dr/2, S) fp32.
  Tensor inv_freq_expanded =
      ops::expand(ops::unsqueeze(ops::unsqueeze(inv_freq_, 0), 2), Dims{batch, inv_freq_.size(0), 1});
  Tensor position_ids_expanded = ops::to(ops::unsqueeze(position_ids, 1), DType::kFloat32);
  Tensor freqs = ops::transpose(ops::matmul(inv_freq_expanded, position_ids_expanded), 1, 2);
  const double attention_scaling = 1.0;  // the default rope's; it scales values only
  Tensor cos = ops::mul_number(ops::cos(freqs), attention_scaling);
  Tensor sin = ops::mul_number(ops::sin(freqs), attention_scaling);
  return {ops::to(cos, x.dtype()), ops::to(sin, x.dtype())};
}

Tensor apply_trailing_rotary(const Tensor& x, const Tensor& cos_in, const Tensor& sin_in, int64_t unsqueeze_dim) {
  const Tensor cos = ops::unsqueeze(ops::repeat_interleave(cos_in, 2, -1), unsqueeze_dim);
  const Tensor sin = ops::unsqueeze(ops::repeat_interleave(sin_in, 2, -1), unsqueeze_dim);
  const int64_t rope_dim = cos.size(-1), width = x.size(-1);
  const Tensor nope = ops::slice(x, -1, 0, width - rope_dim);
  const Tensor rope = ops::slice(x, -1, width - rope_dim, width);
  Tensor rotated;
  {
    Tensor straight = ops::mul(ops::to(rope, DType::kFloat32), cos);
    Tensor turned = ops::mul(ops::to(rotate_half_interleaved(rope), DType::kFloat32), sin);
    rotated = ops::to(ops::add(straight, turned), x.dtype());
  }
  return ops::cat({nope, rotated}, -1);
}

GroupedLinear::GroupedLinear(std::string path, int64_t in_features_per_group, int64_t out_features, int64_t n_groups,
                             ParameterList& params)
    : path_(std::move(path)), n_groups_(n_groups) {
  weight_ = register_parameter(params, path_, "weight", Dims{out_features, in_features_per_group});
}

Tensor GroupedLinear::forward(const Tensor& input) const {
  ModuleScope scope(path_, ModuleKind::kOther);
  const int64_t hidden_dim = input.size(-1);
  const int64_t out_per_group = weight_.size(0) / n_groups_;
  Dims input_shape = input.sizes();
  input_shape.erase(input.dim() - 1);
  input_shape.erase(input.dim() - 2);
  const Tensor w = ops::transpose(ops::view(weight_, Dims{n_groups_, out_per_group, hidden_dim}), 1, 2);
  const Tensor x = ops::transpose(ops::reshape(input, Dims{input.numel() / (n_groups_ * hidden_dim), n_groups_, hidden_dim}), 0, 1);
  const Tensor y = ops::transpose(ops::bmm(x, w), 0, 1);
  Dims out_shape = input_shape;
  out_shape.push_back(n_groups_);
  out_shape.push_back(out_per_group);
  return ops::reshape(y, out_shape);
}

HcaCompressor::HcaCompressor(std::string path, CompressorSizes sizes, ParameterList& params)
    : path_(std::move(path)),
      sizes_(sizes),
      kv_proj(child_path(path_, "kv_proj"), sizes.hidden_size, sizes.head_dim, false, params),
      gate_proj(child_path(path_, "gate_proj"), sizes.hidden_size, sizes.head_dim, false, params),
      position_bias_(register_parameter(params, path_, "position_bias", Dims{sizes.compress_rate, sizes.head_dim})),
      kv_norm(child_path(path_, "kv_norm"), sizes.head_dim, sizes.rms_norm_eps, params),
      rotary_emb(sizes.rope_dim, sizes.main_rope_dim) {}

CompressedKv HcaCompressor::forward(const Tensor& hidden_states, const Tensor& position_ids) const {
  ModuleScope scope(path_, ModuleKind::kOther);
  const int64_t batch = hidden_states.size(0), rate = sizes_.compress_rate, dim = sizes_.head_dim;
  Tensor kv = kv_proj.forward(hidden_states);
  Tensor gate = gate_proj.forward(hidden_states);
  const int64_t usable = (kv.size(1) / rate) * rate;
  Tensor chunk_kv = ops::slice(kv, 1, 0, usable);
  Tensor chunk_gate = ops::slice(gate, 1, 0, usable);
  Tensor compressed;
  if (usable > 0) {
    const int64_t windows = usable / rate;
    chunk_kv = ops::view(chunk_kv, Dims{batch, windows, rate, dim});
    chunk_gate = ops::add(ops::view(chunk_gate, Dims{batch, windows, rate, dim}), position_bias_);
    Tensor probs = ops::to(ops::softmax(chunk_gate, 2, DType::kFloat32), chunk_kv.dtype());
    compressed = kv_norm.forward(ops::sum(ops::mul(chunk_kv, probs), {2}, /*keepdim=*/false));
    compressed = rotate_compressed(compressed, rotary_emb, rate);
  } else {
    compressed = ops::new_zeros(chunk_kv, Dims{batch, 0, dim});
  }
  CompressedKv out;
  out.compressed_kv = ops::unsqueeze(compressed, 1);
  const int64_t entries = out.compressed_kv.size(2), seq = position_ids.size(1);
  if (seq == 1 || entries == 0) return out;
  // Query t sees entry w only once its window has closed: w < (t + 1) // m.
  const Tensor entry_indices = ops::arange(entries);
  const Tensor threshold = causal_threshold(position_ids, rate);
  Tensor block_bias = ops::new_zeros(out.compressed_kv, Dims{batch, 1, seq, entries});
  const Tensor future = ops::ge(ops::view(entry_indices, Dims{1, 1, 1, entries}),
                                ops::unsqueeze(ops::unsqueeze(threshold, 1), -1));
  out.block_bias = ops::masked_fill(block_bias, future);
  return out;
}

Tensor compress_overlapping(const Tensor& kv, const Tensor& gate, const Tensor& position_bias, const LlamaRMSNorm& kv_norm,
                            const InterleavedRotaryEmbedding& rotary_emb, const CompressorSizes& sizes) {
  const int64_t batch = kv.size(0), rate = sizes.compress_rate, dim = sizes.head_dim;
  const int64_t usable = (kv.size(1) / rate) * rate;
  Tensor chunk_kv = ops::slice(kv, 1, 0, usable);
  Tensor chunk_gate = ops::slice(gate, 1, 0, usable);
  if (usable == 0) return ops::new_zeros(chunk_kv, Dims{batch, 0, dim});
  const int64_t windows = usable / rate;
  chunk_kv = ops::view(chunk_kv, Dims{batch, windows, rate, 2 * dim});
  chunk_gate = ops::add(ops::view(chunk_gate, Dims{batch, windows, rate, 2 * dim}), position_bias);
  // Window w's 2m slots: the previous window's Ca (the first D channels) then its own Cb (the last D);
  // window 0's first half stays zero-kv / -inf-gate (weight 0).
  Tensor new_kv = ops::new_zeros(chunk_kv, Dims{batch, windows, 2 * rate, dim});
  Tensor new_gate = ops::new_full(chunk_gate, Dims{batch, windows, 2 * rate, dim}, kMinusInfinity);
  ops::assign_index(new_kv, {ops::IndexStep{false, 2, rate, 2 * rate}}, ops::slice(chunk_kv, 3, dim, 2 * dim));
  ops::assign_index(new_gate, {ops::IndexStep{false, 2, rate, 2 * rate}}, ops::slice(chunk_gate, 3, dim, 2 * dim));
  if (windows > 1) {
    ops::assign_index(new_kv, {ops::IndexStep{false, 1, 1, windows}, ops::IndexStep{false, 2, 0, rate}},
                      ops::slice(ops::slice(chunk_kv, 1, 0, windows - 1), 3, 0, dim));
    ops::assign_index(new_gate, {ops::IndexStep{false, 1, 1, windows}, ops::IndexStep{false, 2, 0, rate}},
                      ops::slice(ops::slice(chunk_gate, 1, 0, windows - 1), 3, 0, dim));
  }
  // The softmax in fp32, cast back before the weighted sum.
  Tensor probs = ops::to(ops::softmax(new_gate, 2, DType::kFloat32), new_kv.dtype());
  Tensor compressed = kv_norm.forward(ops::sum(ops::mul(new_kv, probs), {2}, /*keepdim=*/false));
  return rotate_compressed(compressed, rotary_emb, rate);
}

CompressorIndexer::CompressorIndexer(std::string path, CompressorSizes sizes, CompressorIndexerSizes indexer,
                                     ParameterList& params)
    : path_(std::move(path)),
      scorer_path_(child_path(path_, "scorer")),
      sizes_(sizes),
      indexer_(indexer),
      kv_proj(child_path(path_, "kv_proj"), sizes.hidden_size, 2 * sizes.head_dim, false, params),
      gate_proj(child_path(path_, "gate_proj"), sizes.hidden_size, 2 * sizes.head_dim, false, params),
      position_bias_(register_parameter(params, path_, "position_bias", Dims{sizes.compress_rate, 2 * sizes.head_dim})),
      kv_norm(child_path(path_, "kv_norm"), sizes.head_dim, sizes.rms_norm_eps, params),
      q_b_proj(child_path(path_, "q_b_proj"), indexer.q_lora_rank, indexer.n_heads * sizes.head_dim, false, params),
      rotary_emb(sizes.rope_dim, sizes.main_rope_dim),
      weights_proj(child_path(path_, "scorer.weights_proj"), sizes.hidden_size, indexer.n_heads, false, params) {}

Tensor CompressorIndexer::forward(const Tensor& hidden_states, const Tensor& q_residual, const Tensor& position_ids) const {
  ModuleScope scope(path_, ModuleKind::kOther);
  const int64_t batch = hidden_states.size(0), seq = hidden_states.size(1);
  const int64_t dim = sizes_.head_dim, heads = indexer_.n_heads;
  Tensor kv = kv_proj.forward(hidden_states);
  Tensor gate = gate_proj.forward(hidden_states);
  const Tensor compressed_kv = compress_overlapping(kv, gate, position_bias_, kv_norm, rotary_emb, sizes_);  // (B, W, Di)

  auto [cos_q, sin_q] = rotary_emb.forward(hidden_states, position_ids);
  Tensor q = ops::transpose(ops::view(q_b_proj.forward(q_residual), Dims{batch, seq, heads, dim}), 1, 2);
  q = ops::transpose(apply_trailing_rotary(q, cos_q, sin_q), 1, 2);  // (B, S, Hi, Di)

  // DeepseekV4IndexerScorer: sum over heads of w[t, h] * relu(q[t, h] . K[s]) * Di^-0.5.
  Tensor index_scores;
  {
    ModuleScope scorer(scorer_path_, ModuleKind::kOther);
    const double softmax_scale = 1.0 / std::sqrt(static_cast<double>(dim));
    const double weights_scaling = 1.0 / std::sqrt(static_cast<double>(heads));
    Tensor scores = ops::matmul(ops::to(q, DType::kFloat32),
                                ops::unsqueeze(ops::to(ops::transpose(compressed_kv, -1, -2), DType::kFloat32), 1));
    scores = ops::mul_number(ops::relu(scores), softmax_scale);  // (B, S, Hi, W) fp32
    Tensor weights = ops::mul_number(ops::to(weights_proj.forward(hidden_states), DType::kFloat32), weights_scaling);
    index_scores = ops::sum(ops::mul(scores, ops::unsqueeze(weights, -1)), {2}, /*keepdim=*/false);  // (B, S, W)
  }
  const int64_t entries = compressed_kv.size(1);
  const int64_t top_k = std::min(indexer_.topk, entries);
  if (entries == 0) return ops::topk(index_scores, top_k).indices;
  // Entries not yet closed for a query are masked, and any pick among them replaced by -1.
  const Tensor threshold = causal_threshold(position_ids, sizes_.compress_rate);
  const Tensor entry_indices = ops::arange(entries);
  const Tensor future = ops::ge(ops::view(entry_indices, Dims{1, 1, entries}), ops::unsqueeze(threshold, -1));
  index_scores = ops::masked_fill(index_scores, future);
  Tensor top_k_indices = ops::topk(index_scores, top_k).indices;
  const Tensor invalid = ops::ge(top_k_indices, ops::unsqueeze(threshold, -1));
  return ops::where(invalid, ops::full_like(top_k_indices, -1), top_k_indices);
}

CsaCompressor::CsaCompressor(std::string path, CompressorSizes sizes, CompressorSizes indexer_sizes,
                             CompressorIndexerSizes indexer_config, ParameterList& params)
    : path_(std::move(path)),
      sizes_(sizes),
      kv_proj(child_path(path_, "kv_proj"), sizes.hidden_size, 2 * sizes.head_dim, false, params),
      gate_proj(child_path(path_, "gate_proj"), sizes.hidden_size, 2 * sizes.head_dim, false, params),
      position_bias_(register_parameter(params, path_, "position_bias", Dims{sizes.compress_rate, 2 * sizes.head_dim})),
      kv_norm(child_path(path_, "kv_norm"), sizes.head_dim, sizes.rms_norm_eps, params),
      rotary_emb(sizes.rope_dim, sizes.main_rope_dim),
      indexer(child_path(path_, "indexer"), indexer_sizes, indexer_config, params) {}

std::vector<Tensor> CsaCompressor::buffers() const {
  std::vector<Tensor> out = rotary_emb.buffers();
  out.insert(out.end(), indexer.buffers().begin(), indexer.buffers().end());
  return out;
}

CompressedKv CsaCompressor::forward(const Tensor& hidden_states, const Tensor& q_residual, const Tensor& position_ids) const {
  ModuleScope scope(path_, ModuleKind::kOther);
  const int64_t batch = hidden_states.size(0), seq = hidden_states.size(1);
  Tensor kv = kv_proj.forward(hidden_states);
  Tensor gate = gate_proj.forward(hidden_states);
  CompressedKv out;
  out.compressed_kv = ops::unsqueeze(compress_overlapping(kv, gate, position_bias_, kv_norm, rotary_emb, sizes_), 1);

  const Tensor top_k_indices = indexer.forward(hidden_states, q_residual, position_ids);  // (B, S, k)
  const int64_t entries = out.compressed_kv.size(2);
  // Each query's block bias: 0 at its valid top-k entries, -inf elsewhere (an extra slot takes the -1s).
  const Tensor valid = ops::ge(top_k_indices, 0.0);
  const Tensor safe_indices = ops::where(valid, top_k_indices, ops::full_like(top_k_indices, static_cast<double>(entries)));
  Tensor block_bias = ops::new_full(out.compressed_kv, Dims{batch, 1, seq, entries + 1}, kMinusInfinity);
  ops::scatter_(block_bias, -1, ops::unsqueeze(safe_indices, 1), 0.0);
  out.block_bias = ops::slice(block_bias, -1, 0, entries);
  return out;
}

}  // namespace census::nn
