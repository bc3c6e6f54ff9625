// Dropout as ATen's composite runs it off CUDA (aten/src/ATen/native/Dropout.cpp, _dropout_impl): a
// noise tensor of the input's size and dtype, drawn with bernoulli_ and scaled in place by 1 / (1 - p),
// then multiplied in. The noise requires no gradient, so its two in-place ops record no node; the
// product's node is mul's. On CUDA, F.dropout runs the fused native_dropout instead (PEFT's LoRA dropout
// as a GPU runs it): a new output and a bool mask, the mask kept for the backward.
#include "ops/internal.h"
#include "ops/ops.h"

namespace census::ops {
using internal::alloc_like;
using internal::dispatch;

// bernoulli_.float(Tensor(a!) self, float p, *, Generator? generator)
//   self: zeros_like(grad)  -- on a tensor that requires no gradient, no node is recorded
Tensor& bernoulli_(Tensor& self, double /*p*/) {
  dispatch<1, 1>(Op::kBernoulliInplace, {self}, {self});
  return self;
}

// div_.Scalar(Tensor(a!) self, Scalar other)
//   self: div_tensor_self_backward(grad, other, self.scalar_type())  -- saves no tensor; here no node,
//   the noise requiring no gradient
Tensor& div_(Tensor& self, double /*other*/) {
  dispatch<1, 1>(Op::kDivInplaceScalar, {self}, {self});
  return self;
}

Tensor dropout(const Tensor& self, double p) {
  if (p == 0.0) return self;
  Tensor noise = empty_like(self);
  bernoulli_(noise, 1.0 - p);
  div_(noise, 1.0 - p);
  // mul.Tensor: self's gradient is grad * noise, so the node keeps the noise.
  return mul(self, noise);
}

// native_dropout(Tensor input, float p, bool? train)
//   input: native_dropout_backward(grad, result1, (!train.has_value() || !train.value() ? 1 : (p == 1 ? 0.0 : 1.0 / (1.0 - p))))
//   -> saves result1, the bool mask
class NativeDropoutBackward0 final : public Node {
 public:
  explicit NativeDropoutBackward0(uint64_t seq) : Node("NativeDropoutBackward0", seq) {}
  GradList apply(GradList& grads) override {
    const Tensor mask = result1_.unpack();
    Tensor grad_input = alloc_like(grads[0], grads[0].dtype());
    dispatch<2, 1>(Op::kNativeDropoutBackward, {grads[0], mask}, {grad_input});
    return {grad_input};
  }
  SavedVariable result1_{this};
};

Tensor native_dropout(const Tensor& self, double /*p*/) {
  auto node = make_node<NativeDropoutBackward0>({&self});
  Tensor out = alloc_like(self, self.dtype());
  Tensor mask = alloc_like(self, DType::kBool);
  dispatch<1, 2>(Op::kNativeDropout, {self}, {out, mask});
  set_history(out, node);
  if (node) node->result1_.save(mask, /*is_output=*/true);
  return out;
}

}  // namespace census::ops
