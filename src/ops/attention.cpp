// The census's flash-attention contract: one op standing for the runtime's flash kernel, as the
// reference census registers it (a torch.library custom op with an autograd formula).
//
//   (out, stats_a, stats_b) = flash_attention(q, k, v)
//   q (B, Nh, S, D), k and v (B, Nkv, S, D[v]) with grouped K/V not expanded
//   out (B, Nh, S, Dv) in q's dtype; stats (B, Nh, S, 8) fp32, not differentiable
//
// Its autograd node saves q, k, v, out and both statistics after the kernel ran; its backward
// returns empty_like(q), empty_like(k), empty_like(v).
#include "ops/internal.h"
#include "ops/ops.h"

namespace census::ops {
using internal::alloc;
using internal::alias;
using internal::dispatch;

namespace {

class FlashAttentionBackward final : public Node {
 public:
  FlashAttentionBackward(uint64_t seq, Dims stats_sizes)
      : Node("GeneratedBackwardFor_nd_census_flash_attention_defaultBackward", seq), stats_sizes_(stats_sizes) {
    set_num_inputs(3);
  }
  // Note [Materialized statistics gradients] The kernel's statistics are not differentiable, and the
  // Python node behind a custom op hands its backward zeros in their place (materialize_grads): two
  // fp32 allocations of the statistics' size, freed as the backward returns.
  GradList apply(GradList& grads) override {
    Tensor zeros_a = grads[1].defined() ? grads[1] : new_zeros(grads[0], stats_sizes_, DType::kFloat32);
    Tensor zeros_b = grads[2].defined() ? grads[2] : new_zeros(grads[0], stats_sizes_, DType::kFloat32);
    // ctx.saved_tensors[:3]: every saved tensor is unpacked, the output and statistics dropped at once.
    Tensor query, key, value;
    {
      Tensor saved[6];
      for (int i = 0; i < 6; ++i) saved[i] = saved_[i].unpack();
      query = saved[0];
      key = saved[1];
      value = saved[2];
    }
    return {empty_like(query), empty_like(key), empty_like(value)};
  }
  void release_variables() override {
    for (SavedVariable& saved : saved_) saved.reset();
  }
  SavedVariable saved_[6];  // query, key, value, out, stats_a, stats_b

 private:
  Dims stats_sizes_;
};

}  // namespace

FlashOutputs flash_attention(const Tensor& query, const Tensor& key, const Tensor& value, Op op) {
  const Dims out_sizes{query.size(0), query.size(1), query.size(2), value.size(-1)};
  const Dims stats_sizes{query.size(0), query.size(1), query.size(2), kFlashStats};
  auto node = make_node<FlashAttentionBackward>({&query, &key, &value}, stats_sizes);
  const std::array<Tensor, 3> inputs{query, key, value};
  const internal::SacAction action = internal::sac_action(op, inputs);
  FlashOutputs result;
  if (action == internal::SacAction::kFromCache) {
    std::vector<Tensor> cached = internal::pop_cached(op);
    result = FlashOutputs{cached[0], cached[1], cached[2]};
  } else {
    result = FlashOutputs{alloc(out_sizes, query.dtype()), alloc(stats_sizes, DType::kFloat32),
                          alloc(stats_sizes, DType::kFloat32)};
    dispatch<3, 3>(op, inputs, {result.out, result.softmax_a, result.softmax_b});
    if (action == internal::SacAction::kRunAndCache) internal::push_cached(op, {result.out, result.softmax_a, result.softmax_b});
  }
  set_history(result.out, node, 0);
  if (node) {
    const Tensor* saved[6] = {&query, &key, &value, &result.out, &result.softmax_a, &result.softmax_b};
    for (int i = 0; i < 6; ++i) node->saved_[i].save(*saved[i], /*is_output=*/i >= 3);
  }
  return result;
}


namespace {

// The CUDA contract's node: as FlashAttentionBackward, with zeros materialized for the log-sum-exp and
// the two RNG-state scalars.
class CudaFlashAttentionBackward final : public Node {
 public:
  CudaFlashAttentionBackward(uint64_t seq, Dims lse_sizes)
      : Node("GeneratedBackwardFor_nd_census_cuda_flash_attention_defaultBackward", seq), lse_sizes_(lse_sizes) {
    set_num_inputs(4);
  }
  GradList apply(GradList& grads) override {
    Tensor zeros_lse = grads[1].defined() ? grads[1] : new_zeros(grads[0], lse_sizes_, DType::kFloat32);
    Tensor zeros_seed = grads[2].defined() ? grads[2] : new_zeros(grads[0], Dims{}, DType::kInt64);
    Tensor zeros_offset = grads[3].defined() ? grads[3] : new_zeros(grads[0], Dims{}, DType::kInt64);
    Tensor query, key, value;
    {
      Tensor saved[7];
      for (int i = 0; i < 7; ++i) saved[i] = saved_[i].unpack();
      query = saved[0];
      key = saved[1];
      value = saved[2];
    }
    return {empty_like(query), empty_like(key), empty_like(value)};
  }
  void release_variables() override {
    for (SavedVariable& saved : saved_) saved.reset();
  }
  SavedVariable saved_[7];  // query, key, value, out, logsumexp, philox seed, philox offset

 private:
  Dims lse_sizes_;
};

}  // namespace

Tensor cuda_flash_attention(const Tensor& query, const Tensor& key, const Tensor& value) {
  const int64_t batch = query.size(0), heads = query.size(1), seq = query.size(2);
  const Dims lse_sizes{batch, heads, seq};
  auto node = make_node<CudaFlashAttentionBackward>({&query, &key, &value}, lse_sizes);
  const std::array<Tensor, 3> inputs{query, key, value};
  const internal::SacAction action = internal::sac_action(Op::kCudaFlashAttention, inputs);
  std::vector<Tensor> outputs;
  if (action == internal::SacAction::kFromCache) {
    outputs = internal::pop_cached(Op::kCudaFlashAttention);
  } else {
    // (B, S, Nh, Dv) in memory, handed back as (B, Nh, S, Dv).
    const Tensor bshd = alloc(Dims{batch, seq, heads, value.size(-1)}, query.dtype());
    Dims strides = bshd.strides();
    std::swap(strides[1], strides[2]);
    outputs = {internal::alias(bshd, Dims{batch, heads, seq, value.size(-1)}, strides), alloc(lse_sizes, DType::kFloat32),
               alloc(Dims{}, DType::kInt64), alloc(Dims{}, DType::kInt64)};
    internal::dispatch(Op::kCudaFlashAttention, inputs, outputs);
    if (action == internal::SacAction::kRunAndCache) internal::push_cached(Op::kCudaFlashAttention, outputs);
  }
  set_history(outputs[0], node, 0);
  if (node)
    for (int i = 0; i < 7; ++i) node->saved_[i].save(i < 3 ? inputs[static_cast<size_t>(i)] : outputs[static_cast<size_t>(i - 3)], i >= 3);
  return outputs[0];
}

}  // namespace census::ops
