// The ops of an optimizer step and of the loss's scaling by the micro-batch count: the optimizers'
// updates in their forms (nn/adamw.h, nn/sgd.h, nn/adafactor.h, nn/adamw8bit.h), in place on tensors
// autograd does not track, plus the few that allocate (sqrt and the foreach list of them, the norms, the
// division by a Python number, the fp32 step scalar).
#include <cassert>

#include "ops/internal.h"
#include "ops/ops.h"

namespace census::ops {
using internal::alloc;
using internal::dispatch;

namespace {

// div.Tensor(Tensor self, Tensor other) with other a wrapped number (no tensor autograd keeps):
//   self: grad / other   -> one allocation of grad's shape
class DivNumberBackward0 final : public Node {
 public:
  explicit DivNumberBackward0(uint64_t seq) : Node("DivBackward0", seq) {}
  GradList apply(GradList& grads) override {
    Tensor out = internal::alloc_like(grads[0], grads[0].dtype());
    dispatch<1, 1>(Op::kDivTensor, {grads[0]}, {out});
    return {out};
  }
};

// sqrt(Tensor self)  self: grad / (2 * result.conj())   -> saves result; its backward's 2 * result
// lives until the division has read it. (AdamW runs sqrt under no_grad: no node.)
class SqrtBackward0 final : public Node {
 public:
  explicit SqrtBackward0(uint64_t seq) : Node("SqrtBackward0", seq) {}
  GradList apply(GradList& grads) override {
    const Tensor result = result_.unpack();
    Tensor twice = mul_number(result, 2.0);
    return {div(grads[0], twice)};
  }
  SavedVariable result_{this};
};

template <size_t N>
Tensor& in_place(Op op, Tensor& self, const std::array<Tensor, N>& inputs) {
  dispatch<N, 1>(op, inputs, {self});
  return self;
}

}  // namespace

Tensor div_number(const Tensor& self, double /*other*/) {
  auto node = make_node<DivNumberBackward0>({&self});
  // True division: an integer tensor's quotient is float32, the default dtype.
  Tensor out = internal::alloc_like(self, is_floating(self.dtype()) ? self.dtype() : DType::kFloat32);
  dispatch<1, 1>(Op::kDivTensor, {self}, {out});
  set_history(out, node);
  return out;
}

Tensor scalar_tensor_fresh() { return tensor_fresh(Dims{}, DType::kFloat32); }

Tensor tensor_fresh(const Dims& sizes, DType dtype) {
  Tensor out = alloc(sizes, dtype);
  dispatch<1, 1>(Op::kLiftFresh, {out}, {out});
  return out;
}

Tensor sqrt(const Tensor& self) {
  auto node = make_node<SqrtBackward0>({&self});
  Tensor out = internal::alloc_like(self, self.dtype());
  dispatch<1, 1>(Op::kSqrt, {self}, {out});
  set_history(out, node);
  if (node) node->result_.save(out, /*is_output=*/true);
  return out;
}

Tensor& add_(Tensor& self, double /*other*/) { return in_place<1>(Op::kAddInplace, self, {self}); }
Tensor& mul_(Tensor& self, double /*other*/) { return in_place<1>(Op::kMulInplace, self, {self}); }
Tensor& lerp_(Tensor& self, const Tensor& end, double /*weight*/) {
  return in_place<2>(Op::kLerpInplace, self, {self, end});
}
Tensor lerp(const Tensor& self, const Tensor& end, double /*weight*/) {
  assert(!self.requires_grad() && !end.requires_grad());
  Tensor out = internal::alloc_like(self, self.dtype());
  dispatch<2, 1>(Op::kLerpScalar, {self, end}, {out});
  return out;
}
Tensor& addcmul_(Tensor& self, const Tensor& tensor1, const Tensor& tensor2, double /*value*/) {
  return in_place<3>(Op::kAddcmulInplace, self, {self, tensor1, tensor2});
}
Tensor& addcdiv_(Tensor& self, const Tensor& tensor1, const Tensor& tensor2, double /*value*/) {
  return in_place<3>(Op::kAddcdivInplace, self, {self, tensor1, tensor2});
}

namespace {

// A list op in place on `self`, reading `others` after it: one call, its inputs every list in the
// schema's order, its outputs `self`.
void foreach_in_place(Op op, std::span<Tensor> self, std::initializer_list<std::span<const Tensor>> others) {
  std::vector<Tensor> inputs(self.begin(), self.end());
  for (std::span<const Tensor> list : others) inputs.insert(inputs.end(), list.begin(), list.end());
  dispatch(op, inputs, std::span<const Tensor>(self.data(), self.size()));
}

}  // namespace

void foreach_add_(std::span<Tensor> self, const Tensor& other) {
  foreach_in_place(Op::kForeachAddInplaceTensor, self, {std::span<const Tensor>(&other, 1)});
}
void foreach_add_(std::span<Tensor> self, double /*other*/) { foreach_in_place(Op::kForeachAddInplaceScalar, self, {}); }
void foreach_mul_(std::span<Tensor> self, double /*other*/) { foreach_in_place(Op::kForeachMulInplaceScalar, self, {}); }
void foreach_lerp_(std::span<Tensor> self, std::span<const Tensor> end, double /*weight*/) {
  foreach_in_place(Op::kForeachLerpInplaceScalar, self, {end});
}
void foreach_addcmul_(std::span<Tensor> self, std::span<const Tensor> tensor1, std::span<const Tensor> tensor2,
                      double /*value*/) {
  foreach_in_place(Op::kForeachAddcmulInplaceScalar, self, {tensor1, tensor2});
}
std::vector<Tensor> foreach_sqrt(std::span<const Tensor> self) {
  std::vector<Tensor> out;
  out.reserve(self.size());
  for (const Tensor& t : self) out.push_back(internal::alloc_like(t, t.dtype()));
  dispatch(Op::kForeachSqrt, self, out);
  return out;
}
void foreach_div_(std::span<Tensor> self, std::span<const double> /*other*/) {
  foreach_in_place(Op::kForeachDivInplaceScalarList, self, {});
}
void foreach_addcdiv_(std::span<Tensor> self, std::span<const Tensor> tensor1, std::span<const Tensor> tensor2,
                      std::span<const double> /*values*/) {
  foreach_in_place(Op::kForeachAddcdivInplaceScalarList, self, {tensor1, tensor2});
}

void fused_adamw_(std::span<Tensor> params, std::span<const Tensor> grads, std::span<Tensor> exp_avgs,
                  std::span<Tensor> exp_avg_sqs, std::span<Tensor> steps) {
  std::vector<Tensor> inputs(params.begin(), params.end());
  for (std::span<const Tensor> list : {grads, std::span<const Tensor>(exp_avgs.data(), exp_avgs.size()),
                                       std::span<const Tensor>(exp_avg_sqs.data(), exp_avg_sqs.size()),
                                       std::span<const Tensor>(steps.data(), steps.size())})
    inputs.insert(inputs.end(), list.begin(), list.end());
  // Every list but the gradients written in place; the op returns nothing (the _ overload).
  std::vector<Tensor> written(params.begin(), params.end());
  written.insert(written.end(), exp_avgs.begin(), exp_avgs.end());
  written.insert(written.end(), exp_avg_sqs.begin(), exp_avg_sqs.end());
  written.insert(written.end(), steps.begin(), steps.end());
  dispatch(Op::kFusedAdamwInplace, inputs, written);
}

Tensor linalg_vector_norm(const Tensor& self) {
  Tensor out = alloc(Dims{}, self.dtype());
  dispatch<1, 1>(Op::kLinalgVectorNorm, {self}, {out});
  return out;
}
Tensor linalg_vector_norm(const Tensor& self, int64_t dim, bool keepdim) {
  Tensor out = alloc(internal::reduced_sizes(self.sizes(), {wrap_dim(dim, self.dim())}, keepdim), self.dtype());
  dispatch<1, 1>(Op::kLinalgVectorNorm, {self}, {out});
  return out;
}
Tensor& pow_(Tensor& self, double /*exponent*/) { return in_place<1>(Op::kPowInplaceScalar, self, {self}); }
Tensor& rsqrt_(Tensor& self) { return in_place<1>(Op::kRsqrtInplace, self, {self}); }
Tensor& clamp_min_(Tensor& self, double /*min*/) { return in_place<1>(Op::kClampInplace, self, {self}); }
Tensor& div_number_(Tensor& self, double /*other*/) { return in_place<1>(Op::kDivInplace, self, {self}); }

void foreach_add_(std::span<Tensor> self, std::span<const Tensor> other) {
  foreach_in_place(Op::kForeachAddInplaceList, self, {other});
}
void foreach_mul_(std::span<Tensor> self, std::span<const Tensor> other) {
  foreach_in_place(Op::kForeachMulInplaceList, self, {other});
}
void foreach_mul_(std::span<Tensor> self, std::span<const double> /*other*/) {
  foreach_in_place(Op::kForeachMulInplaceScalarList, self, {});
}
void foreach_div_(std::span<Tensor> self, std::span<const Tensor> other) {
  foreach_in_place(Op::kForeachDivInplaceList, self, {other});
}
void foreach_lerp_(std::span<Tensor> self, std::span<const Tensor> end, std::span<const double> /*weight*/) {
  foreach_in_place(Op::kForeachLerpInplaceScalarList, self, {end});
}
void foreach_clamp_min_(std::span<Tensor> self, double /*min*/) {
  foreach_in_place(Op::kForeachClampMinInplaceScalar, self, {});
}
void foreach_rsqrt_(std::span<Tensor> self) { foreach_in_place(Op::kForeachRsqrtInplace, self, {}); }

std::vector<Tensor> foreach_mul(std::span<const Tensor> self, std::span<const Tensor> other) {
  std::vector<Tensor> inputs(self.begin(), self.end());
  inputs.insert(inputs.end(), other.begin(), other.end());
  std::vector<Tensor> out;
  out.reserve(self.size());
  for (const Tensor& t : self) out.push_back(internal::alloc_like(t, t.dtype()));
  dispatch(Op::kForeachMulList, inputs, out);
  return out;
}

void fused_sgd_(std::span<Tensor> params, std::span<const Tensor> grads, std::span<Tensor> momentum_buffers) {
  std::vector<Tensor> inputs(params.begin(), params.end());
  inputs.insert(inputs.end(), grads.begin(), grads.end());
  inputs.insert(inputs.end(), momentum_buffers.begin(), momentum_buffers.end());
  std::vector<Tensor> written(params.begin(), params.end());
  written.insert(written.end(), momentum_buffers.begin(), momentum_buffers.end());
  dispatch(Op::kFusedSgdInplace, inputs, written);
}

void bnb_optimizer_update_32bit(Tensor& param, const Tensor& grad, Tensor& state1, Tensor& state2) {
  dispatch<4, 3>(Op::kBnbOptimizerUpdate32bit, {grad, param, state1, state2}, {param, state1, state2});
}
void bnb_optimizer_update_8bit_blockwise(Tensor& param, const Tensor& grad, Tensor& state1, Tensor& state2,
                                         std::span<const Tensor> maps_and_maxima) {
  std::vector<Tensor> inputs{grad, param, state1, state2};
  inputs.insert(inputs.end(), maps_and_maxima.begin(), maps_and_maxima.end());
  const std::array<Tensor, 3> written{param, state1, state2};
  dispatch(Op::kBnbOptimizerUpdate8bitBlockwise, inputs, written);
}

}  // namespace census::ops
