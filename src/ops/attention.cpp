// The census's flash-attention contract: one op standing for the runtime's flash kernel, as the
// reference census registers it (a torch.library custom op with an autograd formula).
//
//   (out, stats_a, stats_b) = flash_attention(q, k, v)
//   q (B, Nh, S, D), k and v (B, Nkv, S, D[v]) with grouped K/V not expanded
//   out (B, Nh, S, Dv) in q's dtype; stats (B, Nh, S, 8) fp32, not differentiable
//
// Its autograd node saves q, k, v, out and both statistics after the kernel ran; its backward
// returns empty_like(q), empty_like(k), empty_like(v).
#include "ops/autocast.h"
#include "ops/contract_node.h"
#include "ops/internal.h"
#include "ops/ops.h"

namespace census::ops {
using internal::alloc;
using internal::ContractBackward;
using internal::alias;
using internal::dispatch;


FlashOutputs flash_attention(const Tensor& query, const Tensor& key, const Tensor& value, Op op) {
  // Called where Transformers calls scaled_dot_product_attention, which autocast casts to bf16.
  if (const autocast::Wrap cast; cast) {
    const Tensor q = cast.lower(query), k = cast.lower(key), v = cast.lower(value);
    return flash_attention(q, k, v, op);
  }
  const Dims out_sizes{query.size(0), query.size(1), query.size(2), value.size(-1)};
  const Dims stats_sizes{query.size(0), query.size(1), query.size(2), kFlashStats};
  // Note [Materialized statistics gradients] The statistics are not differentiable: their gradients
  // come in as zeros, two fp32 allocations freed as the backward returns.
  auto node = make_node<ContractBackward>(
      {&query, &key, &value}, "GeneratedBackwardFor_nd_census_flash_attention_defaultBackward",
      std::vector<ContractBackward::Output>{{out_sizes, query.dtype()}, {stats_sizes, DType::kFloat32},
                                            {stats_sizes, DType::kFloat32}},
      std::vector<int>{0, 1, 2});
  const std::array<Tensor, 3> inputs{query, key, value};
  std::array<Tensor, 3> outputs;
  internal::run_op(op, inputs, outputs, [&] {
    outputs = {alloc(out_sizes, query.dtype()), alloc(stats_sizes, DType::kFloat32), alloc(stats_sizes, DType::kFloat32)};
  });
  FlashOutputs result{std::move(outputs[0]), std::move(outputs[1]), std::move(outputs[2])};
  set_history(result.out, node, 0);
  if (node) {
    const Tensor* saved[6] = {&query, &key, &value, &result.out, &result.softmax_a, &result.softmax_b};
    for (int i = 0; i < 6; ++i) node->save(*saved[i], /*is_output=*/i >= 3);
  }
  return result;
}



Tensor cuda_flash_attention(const Tensor& query, const Tensor& key, const Tensor& value) {
  if (const autocast::Wrap cast; cast) {
    const Tensor q = cast.lower(query), k = cast.lower(key), v = cast.lower(value);
    return cuda_flash_attention(q, k, v);
  }
  const int64_t batch = query.size(0), heads = query.size(1), seq = query.size(2);
  const Dims lse_sizes{batch, heads, seq};
  // The log-sum-exp and the RNG state are not differentiable: their gradients come in as zeros.
  auto node = make_node<ContractBackward>(
      {&query, &key, &value}, "GeneratedBackwardFor_nd_census_cuda_flash_attention_defaultBackward",
      std::vector<ContractBackward::Output>{{Dims{batch, heads, seq, value.size(-1)}, query.dtype()},
                                            {lse_sizes, DType::kFloat32}, {Dims{}, DType::kInt64}, {Dims{}, DType::kInt64}},
      std::vector<int>{0, 1, 2});
  const std::array<Tensor, 3> inputs{query, key, value};
  std::array<Tensor, 4> outputs;
  internal::run_op(Op::kCudaFlashAttention, inputs, outputs, [&] {
    // (B, S, Nh, Dv) in memory, handed back as (B, Nh, S, Dv).
    const Tensor bshd = alloc(Dims{batch, seq, heads, value.size(-1)}, query.dtype());
    Dims strides = bshd.strides();
    std::swap(strides[1], strides[2]);
    outputs = {internal::alias(bshd, Dims{batch, heads, seq, value.size(-1)}, strides), alloc(lse_sizes, DType::kFloat32),
               alloc(Dims{}, DType::kInt64), alloc(Dims{}, DType::kInt64)};
  });
  set_history(outputs[0], node, 0);
  if (node)
    for (int i = 0; i < 7; ++i) node->save(i < 3 ? inputs[static_cast<size_t>(i)] : outputs[static_cast<size_t>(i - 3)], i >= 3);
  return outputs[0];
}

}  // namespace census::ops
