#include "nn/gated_delta_rule.h"

#include <cmath>
#include <vector>

#include "ops/dispatch.h"
#include "ops/ops.h"

namespace census::nn {
namespace {

using ops::IndexStep;

// One step of the chunk loop: the chunk it runs, and how many alike chunks it stands for.
struct ChunkStep {
  int64_t chunk;
  int64_t times;
};

// The chunk loop's steps. Every chunk but the first (whose state is the zeros, needing no gradient)
// and the last (whose state nothing reads) runs the same ops on the same shapes, so where the census
// folds alike iterations (Note [Alike iterations], ops/dispatch.h) chunk 1 stands for chunks 1 to
// C-4 and the last three run as they are; else every chunk runs. The loop names its recurrent state
// and its attn to the standing chunk (Note [Carried values of alike iterations]): under no_grad and in
// a checkpoint's forward one of each lives at a time.
std::vector<ChunkStep> chunk_steps(int64_t chunks) {
  constexpr int64_t kAsTheyAre = 3;  // the last chunks, after the standing one
  std::vector<ChunkStep> steps;
  if (Session::current().folds_alike_iterations() && chunks >= kAsTheyAre + 3) {
    steps.push_back({0, 1});
    steps.push_back({1, chunks - 1 - kAsTheyAre});
    for (int64_t i = chunks - kAsTheyAre; i < chunks; ++i) steps.push_back({i, 1});
    return steps;
  }
  for (int64_t i = 0; i < chunks; ++i) steps.push_back({i, 1});
  return steps;
}

// torch_chunk_gated_delta_rule (transformers/models/qwen3_next/modeling_qwen3_next.py), statement by
// statement; Python's evaluation order is kept, as it sets the nodes' sequence numbers and so the
// order the backward runs them.
Tensor torch_chunk_gated_delta_rule(Tensor query, Tensor key, Tensor value, Tensor g, Tensor beta) {
  const int64_t chunk_size = kGdnChunkSize;
  const DType initial_dtype = query.dtype();
  query = l2norm(query);
  key = l2norm(key);
  {
    // [x.transpose(1, 2).contiguous().to(torch.float32) for x in (query, key, value, beta, g)]
    auto to_heads = [](const Tensor& x) { return ops::to(ops::contiguous(ops::transpose(x, 1, 2)), DType::kFloat32); };
    Tensor q = to_heads(query), k = to_heads(key), v = to_heads(value), b = to_heads(beta), gates = to_heads(g);
    query = q, key = k, value = v, beta = b, g = gates;
  }
  const int64_t batch = key.size(0), heads = key.size(1), sequence_length = key.size(2);
  const int64_t k_head_dim = key.size(3), v_head_dim = value.size(3);
  const int64_t pad_size = (chunk_size - sequence_length % chunk_size) % chunk_size;
  query = ops::constant_pad_nd(query, {0, 0, 0, pad_size});  // (B, H, S', Dk) fp32
  key = ops::constant_pad_nd(key, {0, 0, 0, pad_size});
  value = ops::constant_pad_nd(value, {0, 0, 0, pad_size});
  beta = ops::constant_pad_nd(beta, {0, pad_size});  // (B, H, S') fp32
  g = ops::constant_pad_nd(g, {0, pad_size});
  const int64_t total_sequence_length = sequence_length + pad_size;
  const int64_t chunks = total_sequence_length / chunk_size;
  query = ops::mul(query, 1.0 / std::sqrt(static_cast<double>(k_head_dim)));

  Tensor v_beta = ops::mul(value, ops::unsqueeze(beta, -1));
  Tensor k_beta = ops::mul(key, ops::unsqueeze(beta, -1));
  // Chunks of 64 tokens: (B, H, C, 64, D), views.
  auto to_chunks = [&](const Tensor& x) { return ops::reshape(x, Dims{batch, heads, chunks, chunk_size, x.size(-1)}); };
  query = to_chunks(query), key = to_chunks(key), value = to_chunks(value);
  k_beta = to_chunks(k_beta), v_beta = to_chunks(v_beta);
  g = ops::reshape(g, Dims{batch, heads, chunks, chunk_size});
  Tensor mask = ops::triu(ops::ones(Dims{chunk_size, chunk_size}, DType::kBool), 0);

  g = ops::cumsum(g, -1);
  // decay_mask = ((g[..., :, None] - g[..., None, :]).tril().exp().float()).tril()   (B, H, C, 64, 64) fp32
  Tensor decay_mask = ops::sub(ops::unsqueeze(g, -1), ops::unsqueeze(g, -2));
  decay_mask = ops::tril(decay_mask);
  decay_mask = ops::exp(decay_mask);
  decay_mask = ops::tril(decay_mask);
  // attn = -((k_beta @ key^T) * decay_mask).masked_fill(mask, 0)
  Tensor attn = ops::matmul(k_beta, ops::transpose(key, -1, -2));
  attn = ops::mul(attn, decay_mask);
  attn = ops::neg(ops::masked_fill(attn, mask));
  // The intra-chunk loop: row i of attn gets row + (row[..., None] * sub).sum(-2), in place.
  for (int64_t i = 1; i < chunk_size; ++i) {
    const IndexStep row_index[] = {{true, 3, i, 0}, {false, 3, 0, i}};  // attn[..., i, :i]
    const IndexStep sub_index[] = {{false, 3, 0, i}, {false, 4, 0, i}};  // attn[..., :i, :i]
    Tensor row = ops::clone(ops::index_view(attn, row_index));  // (B, H, C, i)
    Tensor sub = ops::clone(ops::index_view(attn, sub_index));  // (B, H, C, i, i)
    Tensor product = ops::mul(ops::unsqueeze(row, -1), sub);
    Tensor updated = ops::add(row, ops::sum(product, {3}, /*keepdim=*/false));
    product = Tensor();
    ops::assign_index(attn, {{true, 3, i, 0}, {false, 3, 0, i}}, updated);
  }
  attn = ops::add(attn, ops::eye(chunk_size, attn.dtype()));
  value = ops::matmul(attn, v_beta);  // (B, H, C, 64, Dv)
  Tensor k_decayed = ops::mul(k_beta, ops::unsqueeze(ops::exp(g), -1));
  Tensor k_cumdecay = ops::matmul(attn, k_decayed);  // (B, H, C, 64, Dk)
  k_decayed = Tensor();
  Tensor last_recurrent_state = ops::zeros(Dims{batch, heads, k_head_dim, v_head_dim}, value.dtype());
  Tensor core_attn_out = ops::zeros_like(value);
  mask = ops::triu(ops::ones(Dims{chunk_size, chunk_size}, DType::kBool), 1);  // unused since 2026-04

  for (const auto [i, times] : chunk_steps(chunks)) {
    RepeatScope repeat(times);  // first: it ends after every temporary of the step has gone
    repeat.carries_in(last_recurrent_state);
    Tensor q_i = ops::select(query, 2, i), k_i = ops::select(key, 2, i), v_i = ops::select(value, 2, i);
    Tensor scores = ops::matmul(q_i, ops::transpose(k_i, -1, -2));
    attn = ops::mul(scores, ops::select(decay_mask, 2, i));  // (B, H, 64, 64)
    scores = Tensor();
    Tensor v_prime = ops::matmul(ops::select(k_cumdecay, 2, i), last_recurrent_state);
    Tensor v_new = ops::sub(v_i, v_prime);
    v_prime = Tensor();
    Tensor g_i = ops::select(g, 2, i);  // (B, H, 64)
    Tensor q_decayed = ops::mul(q_i, ops::exp(ops::unsqueeze(g_i, -1)));
    Tensor attn_inter = ops::matmul(q_decayed, last_recurrent_state);
    q_decayed = Tensor();
    // core_attn_out[:, :, i] = attn_inter + attn @ v_new
    Tensor intra = ops::matmul(attn, v_new);
    ops::assign_index(core_attn_out, {{true, 2, i, 0}}, ops::add(attn_inter, intra));
    intra = Tensor();
    attn_inter = Tensor();
    // state * g[:, :, i, -1, None, None].exp() + (k_i * (g[:, :, i, -1, None] - g[:, :, i]).exp()[..., None]).mT @ v_new
    Tensor g_last = ops::select(ops::select(g, 2, i), 2, -1);  // (B, H)
    Tensor decayed_state = ops::mul(last_recurrent_state, ops::exp(ops::unsqueeze(ops::unsqueeze(g_last, 2), 3)));
    Tensor g_last_column = ops::unsqueeze(ops::select(ops::select(g, 2, i), 2, -1), 2);  // (B, H, 1)
    Tensor key_decay = ops::exp(ops::sub(g_last_column, ops::select(g, 2, i)));     // (B, H, 64)
    Tensor k_scaled = ops::mul(k_i, ops::unsqueeze(key_decay, -1));
    Tensor update = ops::matmul(ops::transpose(k_scaled, -1, -2), v_new);
    last_recurrent_state = ops::add(decayed_state, update);
    repeat.carries_out(last_recurrent_state);
    repeat.leaves(attn);
  }
  last_recurrent_state = Tensor();  // output_final_state=False
  core_attn_out = ops::reshape(core_attn_out, Dims{batch, heads, total_sequence_length, v_head_dim});
  if (pad_size > 0) core_attn_out = ops::slice(core_attn_out, 2, 0, sequence_length);
  return ops::to(ops::contiguous(ops::transpose(core_attn_out, 1, 2)), initial_dtype);  // (B, S, H, Dv)
}

}  // namespace

std::optional<GdnBackend> parse_gdn_backend(std::string_view name) {
  if (name == "eager") return GdnBackend::kEager;
  // "kernel" is the name the torch-2 oracle gives the same contract.
  if (name == "triton" || name == "kernel") return GdnBackend::kTriton;
  return std::nullopt;
}

std::string_view gdn_backend_name(GdnBackend backend) { return backend == GdnBackend::kEager ? "eager" : "triton"; }

Tensor l2norm(const Tensor& x, double eps) {
  Tensor inv_norm = ops::rsqrt(ops::add(ops::sum(ops::mul(x, x), {x.dim() - 1}, /*keepdim=*/true), eps));
  return ops::mul(x, inv_norm);
}

Tensor chunk_gated_delta_rule(GdnBackend backend, std::string_view path, const Tensor& query, const Tensor& key,
                              const Tensor& value, const Tensor& g, const Tensor& beta) {
  ModuleScope rule(path, ModuleKind::kDeltaRule);
  if (backend == GdnBackend::kEager) return torch_chunk_gated_delta_rule(query, key, value, g, beta);
  Tensor q = l2norm(query);
  Tensor k = l2norm(key);
  return ops::gated_delta_rule_contract(q, k, value, g, beta, kGdnChunkSize);
}

}  // namespace census::nn
