// Dropout as ATen's composite runs it off CUDA (aten/src/ATen/native/Dropout.cpp, _dropout_impl): a
// noise tensor of the input's size and dtype, drawn with bernoulli_ and scaled in place by 1 / (1 - p),
// then multiplied in. The noise requires no gradient, so its two in-place ops record no node; the
// product's node is mul's.
#include "ops/internal.h"
#include "ops/ops.h"

namespace census::ops {
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

}  // namespace census::ops
