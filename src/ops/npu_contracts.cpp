// The NPU kernel contracts: torch_npu's kernels as HyperParallel's fused modules call them, each one op
// that returns outputs of the kernel's shapes and saves what the kernel's backward takes (torch_npu's
// derivatives). Like the reference census's, each is a custom op with an autograd formula: its node
// hands the backward zeros for the gradients of its non-differentiable outputs (Note [Materialized
// statistics gradients]), unpacks every saved tensor, and returns empty tensors of its
// differentiable inputs' sizes.
#include "ops/contract_node.h"
#include "ops/internal.h"
#include "ops/ops.h"

namespace census::ops {
using internal::alloc;
using internal::ContractBackward;
using internal::dispatch;

namespace {

// HyperParallel's GMMFunction (components/functional/grouped_matmul.py): saves x, weight and the
// group_list tensor; its backward makes the gradient contiguous, then dx = gmm(grad, weight^T) and
// the grouped weight gradient gmm(x^T, grad, group_type=2).
class GmmFunctionBackward final : public Node {
 public:
  explicit GmmFunctionBackward(uint64_t seq) : Node("GMMFunctionBackward", seq) {}
  GradList apply(GradList& grads) override {
    const Tensor x = x_.unpack();
    const Tensor weight = weight_.unpack();
    const Tensor group_list = group_list_.unpack();
    const Tensor grad = contiguous(grads[0]);
    GradList out(2);
    Tensor dx = alloc(Dims{grad.size(0), weight.size(-2)}, grad.dtype());
    dispatch<3, 1>(Op::kNpuGroupedMatmul, {grad, weight, group_list}, {dx});
    Tensor dw = alloc(weight.sizes(), grad.dtype());
    dispatch<3, 1>(Op::kNpuGroupedMatmul, {x, grad, group_list}, {dw});
    out[0] = dx;
    out[1] = dw;
    return out;
  }
  SavedVariable x_{this};
  SavedVariable weight_{this};
  SavedVariable group_list_{this};
};

}  // namespace

NpuRmsNormOutputs npu_rms_norm(const Tensor& x, const Tensor& gamma) {
  Dims rstd_sizes = x.sizes();
  rstd_sizes[rstd_sizes.size() - 1] = 1;
  // Backward: empty_like(x), empty_like(gamma), nothing for epsilon.
  auto node = make_node<ContractBackward>({&x, &gamma}, "GeneratedBackwardFor_nd_census_npu_rms_norm_defaultBackward",
      std::vector<ContractBackward::Output>{{x.sizes(), x.dtype()}, {rstd_sizes, DType::kFloat32}}, std::vector<int>{0, 1});
  NpuRmsNormOutputs out{internal::alloc_like(x, x.dtype()), alloc(rstd_sizes, DType::kFloat32)};
  dispatch<2, 2>(Op::kNpuRmsNorm, {x, gamma}, {out.y, out.rstd});
  set_history(out.y, node, 0);
  if (node) {
    node->save(x, false);
    node->save(gamma, false);
    node->save(out.rstd, true);
  }
  return out;
}

Tensor npu_swiglu(const Tensor& x) {
  Dims sizes = x.sizes();
  sizes[sizes.size() - 1] /= 2;
  auto node = make_node<ContractBackward>({&x}, "GeneratedBackwardFor_nd_census_npu_swiglu_defaultBackward",
      std::vector<ContractBackward::Output>{{sizes, x.dtype()}}, std::vector<int>{0});
  Tensor out = alloc(sizes, x.dtype());
  dispatch<1, 1>(Op::kNpuSwiglu, {x}, {out});
  set_history(out, node);
  if (node) node->save(x, false);
  return out;
}

Tensor npu_rotary_mul(const Tensor& x, const Tensor& r1, const Tensor& r2) {
  auto node = make_node<ContractBackward>({&x, &r1, &r2}, "GeneratedBackwardFor_nd_census_npu_rotary_mul_defaultBackward",
                                          std::vector<ContractBackward::Output>{{x.sizes(), x.dtype()}},
                                          std::vector<int>{0, 1, 2});
  Tensor out = internal::alloc_like(x, x.dtype());
  dispatch<3, 1>(Op::kNpuRotaryMul, {x, r1, r2}, {out});
  set_history(out, node);
  if (node) {
    node->save(x, false);
    node->save(r1, false);
    node->save(r2, false);
  }
  return out;
}

NpuPermuted npu_moe_token_permute(const Tensor& tokens, const Tensor& indices) {
  const int64_t routes = indices.numel();
  auto node = make_node<ContractBackward>(
      {&tokens, &indices}, "GeneratedBackwardFor_nd_census_npu_moe_token_permute_defaultBackward",
      std::vector<ContractBackward::Output>{{Dims{routes, tokens.size(-1)}, tokens.dtype()}, {Dims{routes}, DType::kInt32}},
      std::vector<int>{0, -1});
  NpuPermuted out{alloc(Dims{routes, tokens.size(-1)}, tokens.dtype()), alloc(Dims{routes}, DType::kInt32)};
  dispatch<2, 2>(Op::kNpuMoeTokenPermute, {tokens, indices}, {out.permuted, out.sorted_indices});
  set_history(out.permuted, node, 0);
  if (node) {
    node->save(tokens, false);
    node->save(indices, false);
    node->save(out.sorted_indices, true);
  }
  return out;
}

Tensor npu_moe_token_unpermute(const Tensor& permuted, const Tensor& sorted_indices, const Tensor& probs) {
  const Dims sizes{probs.size(0), permuted.size(-1)};
  auto node = make_node<ContractBackward>({&permuted, &sorted_indices, &probs},
                                          "GeneratedBackwardFor_nd_census_npu_moe_token_unpermute_defaultBackward",
                                          std::vector<ContractBackward::Output>{{sizes, permuted.dtype()}},
                                          std::vector<int>{0, -1, 2});
  Tensor out = alloc(sizes, permuted.dtype());
  dispatch<3, 1>(Op::kNpuMoeTokenUnpermute, {permuted, sorted_indices, probs}, {out});
  set_history(out, node);
  if (node) {
    node->save(permuted, false);
    node->save(sorted_indices, false);
    node->save(probs, false);
  }
  return out;
}

Tensor npu_grouped_matmul(const Tensor& x, const Tensor& weight, const Tensor& group_list) {
  auto node = make_node<GmmFunctionBackward>({&x, &weight});
  Tensor out = alloc(Dims{x.size(0), weight.size(-1)}, x.dtype());
  dispatch<3, 1>(Op::kNpuGroupedMatmul, {x, weight, group_list}, {out});
  set_history(out, node);
  if (node) {
    node->x_.save(x);
    node->weight_.save(weight);
    node->group_list_.save(group_list);
  }
  return out;
}

}  // namespace census::ops
