// The ops of an optimizer step and of the loss's scaling by the micro-batch count: AdamW's update,
// as torch.optim.AdamW(foreach=False, fused=False) runs it, in place on tensors autograd does not
// track, plus the few that allocate (sqrt, the division by a Python number, the fp32 step scalar).
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
  Tensor out = internal::alloc_like(self, self.dtype());
  dispatch<1, 1>(Op::kDivTensor, {self}, {out});
  set_history(out, node);
  return out;
}

Tensor scalar_tensor_fresh() {
  Tensor out = alloc(Dims{}, DType::kFloat32);
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
Tensor& addcmul_(Tensor& self, const Tensor& tensor1, const Tensor& tensor2, double /*value*/) {
  return in_place<3>(Op::kAddcmulInplace, self, {self, tensor1, tensor2});
}
Tensor& addcdiv_(Tensor& self, const Tensor& tensor1, const Tensor& tensor2, double /*value*/) {
  return in_place<3>(Op::kAddcdivInplace, self, {self, tensor1, tensor2});
}

}  // namespace census::ops
