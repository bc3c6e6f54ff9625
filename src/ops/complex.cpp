// Complex views and torch.polar: Llama 4's rotary multiplies queries and keys, read as complex64 pairs,
// by complex frequencies (freqs_cis). Above each node, the derivatives.yaml entry it follows.
#include <cassert>

#include "ops/internal.h"
#include "ops/ops.h"

namespace census::ops {
using internal::dispatch;

namespace {

// view_as_complex(Tensor(a) self) -> Tensor(a)
//   self: at::view_as_real(grad.contiguous().resolve_conj())   -- saves nothing
class ViewAsComplexBackward0 final : public Node {
 public:
  explicit ViewAsComplexBackward0(uint64_t seq) : Node("ViewAsComplexBackward0", seq) {}
  GradList apply(GradList& grads) override { return {view_as_real(contiguous(grads[0]))}; }
};

// view_as_real(Tensor(a) self) -> Tensor(a)
//   self: at::view_as_complex(grad.contiguous())   -- saves nothing
class ViewAsRealBackward0 final : public Node {
 public:
  explicit ViewAsRealBackward0(uint64_t seq) : Node("ViewAsRealBackward0", seq) {}
  GradList apply(GradList& grads) override { return {view_as_complex(contiguous(grads[0]))}; }
};

}  // namespace

Tensor view_as_complex(const Tensor& self) {
  assert(self.dtype() == DType::kFloat32 && self.size(-1) == 2 && self.strides()[self.dim() - 1] == 1);
  Dims sizes = self.sizes(), strides = self.strides();
  sizes.erase(self.dim() - 1);
  strides.erase(self.dim() - 1);
  for (int d = 0; d < strides.size(); ++d) strides[d] /= 2;  // in complex elements
  auto node = make_node<ViewAsComplexBackward0>({&self});
  Tensor out = internal::alias(self, sizes, strides, DType::kComplex64);
  out.impl()->storage_offset = self.storage_offset() / 2;
  dispatch<1, 1>(Op::kViewAsComplex, {self}, {out});
  set_history(out, node);
  return out;
}

Tensor view_as_real(const Tensor& self) {
  assert(self.dtype() == DType::kComplex64);
  Dims sizes = self.sizes(), strides = self.strides();
  for (int d = 0; d < strides.size(); ++d) strides[d] *= 2;  // in real elements
  sizes.insert(self.dim(), 2);
  strides.insert(self.dim(), 1);
  auto node = make_node<ViewAsRealBackward0>({&self});
  Tensor out = internal::alias(self, sizes, strides, DType::kFloat32);
  out.impl()->storage_offset = self.storage_offset() * 2;
  dispatch<1, 1>(Op::kViewAsReal, {self}, {out});
  set_history(out, node);
  return out;
}

// polar(Tensor abs, Tensor angle): the model calls it under no_grad.
Tensor polar(const Tensor& abs, const Tensor& angle) {
  assert(!abs.requires_grad() && !angle.requires_grad());
  Tensor out = internal::alloc_like(abs, DType::kComplex64);
  dispatch<2, 1>(Op::kPolar, {abs, angle}, {out});
  return out;
}

}  // namespace census::ops
