// Matrix products, and the composites that reach them (linear, matmul) as ATen decomposes them.
#include <cassert>

#include "ops/internal.h"
#include "ops/ops.h"

namespace census::ops {
using internal::alloc;
using internal::dispatch;

namespace {

bool column_major(const Dims& sizes, const Dims& strides) { return strides[0] == 1 && strides[1] == sizes[0]; }

// FunctionsManual.cpp mm_mat1_backward: one allocation of mat1's size, column-major when mat1 was.
Tensor mm_mat1_backward(const Tensor& grad, const Tensor& mat2, const Dims& mat1_sizes, const Dims& mat1_strides) {
  if (column_major(mat1_sizes, mat1_strides)) return t(mm(mat2, t(grad)));
  return mm(grad, t(mat2));
}

// FunctionsManual.cpp mm_mat2_backward: one allocation of mat2's size, column-major when mat2 was
// (a weight's W.t() is, so its gradient comes back with W's own strides).
Tensor mm_mat2_backward(const Tensor& grad, const Tensor& mat1, const Dims& mat2_sizes, const Dims& mat2_strides) {
  if (column_major(mat2_sizes, mat2_strides)) return t(mm(t(grad), mat1));
  return mm(t(mat1), grad);
}

// mm(Tensor self, Tensor mat2)
//   self: mm_mat1_backward(grad, mat2, ...)  -> saves mat2 iff self needs grad
//   mat2: mm_mat2_backward(grad, self, ...)  -> saves self iff mat2 needs grad
class MmBackward0 final : public Node {
 public:
  MmBackward0(uint64_t seq, const Tensor& self, const Tensor& mat2)
      : Node("MmBackward0", seq),
        self_sizes_(self.sizes()), self_strides_(self.strides()),
        mat2_sizes_(mat2.sizes()), mat2_strides_(mat2.strides()) {}
  // Note [MmBackward0 order] PyTorch 2's MmBackward0 computes mat2's gradient before self's (seen in
  // the reference's allocation log: a linear's weight gradient is allocated before its input's),
  // where AddmmBackward0 computes mat1's before mat2's.
  GradList apply(GradList& grads) override {
    const Tensor self = self_.unpack();
    const Tensor mat2 = mat2_.unpack();
    GradList out(2);
    if (should_compute_output(1)) out[1] = mm_mat2_backward(grads[0], self, mat2_sizes_, mat2_strides_);
    if (should_compute_output(0)) out[0] = mm_mat1_backward(grads[0], mat2, self_sizes_, self_strides_);
    return out;
  }
  SavedVariable self_{this};
  SavedVariable mat2_{this};

 private:
  Dims self_sizes_, self_strides_, mat2_sizes_, mat2_strides_;
};

// addmm(Tensor self, Tensor mat1, Tensor mat2, Scalar beta, Scalar alpha)
//   self: maybe_multiply(grad, beta)   (the gradient itself; the engine's sum_to reduces it to the bias)
//   mat1: mm_mat1_backward(grad, mat2, ...)  -> saves mat2 iff mat1 needs grad
//   mat2: mm_mat2_backward(grad, mat1, ...)  -> saves mat1 iff mat2 needs grad
class AddmmBackward0 final : public Node {
 public:
  AddmmBackward0(uint64_t seq, const Tensor& mat1, const Tensor& mat2)
      : Node("AddmmBackward0", seq),
        mat1_sizes_(mat1.sizes()), mat1_strides_(mat1.strides()),
        mat2_sizes_(mat2.sizes()), mat2_strides_(mat2.strides()) {}
  GradList apply(GradList& grads) override {
    const Tensor mat2 = mat2_.unpack();
    const Tensor mat1 = mat1_.unpack();
    GradList out(3);
    if (should_compute_output(0)) out[0] = grads[0];
    if (should_compute_output(1)) out[1] = mm_mat1_backward(grads[0], mat2, mat1_sizes_, mat1_strides_);
    if (should_compute_output(2)) out[2] = mm_mat2_backward(grads[0], mat1, mat2_sizes_, mat2_strides_);
    return out;
  }
  SavedVariable mat1_{this};
  SavedVariable mat2_{this};

 private:
  Dims mat1_sizes_, mat1_strides_, mat2_sizes_, mat2_strides_;
};

Dims leading_sizes(const Tensor& input) {
  Dims sizes;
  for (int i = 0; i + 1 < input.dim(); ++i) sizes.push_back(input.sizes()[i]);
  return sizes;
}

int64_t leading_numel(const Tensor& input) { return leading_sizes(input).product(); }

}  // namespace

Tensor mm(const Tensor& self, const Tensor& mat2) {
  assert(self.dim() == 2 && mat2.dim() == 2 && self.size(1) == mat2.size(0));
  auto node = make_node<MmBackward0>({&self, &mat2}, self, mat2);
  if (node) {
    if (node->should_compute_output(0)) node->mat2_.save(mat2);
    if (node->should_compute_output(1)) node->self_.save(self);
  }
  const std::array<Tensor, 2> inputs{self, mat2};
  Tensor out = internal::run_op(Op::kMm, inputs, [&] {
    return alloc(Dims{self.size(0), mat2.size(1)}, promote(self.dtype(), mat2.dtype()));
  });
  set_history(out, node);
  return out;
}

Tensor addmm(const Tensor& bias, const Tensor& mat1, const Tensor& mat2) {
  auto node = make_node<AddmmBackward0>({&bias, &mat1, &mat2}, mat1, mat2);
  if (node) {
    if (node->should_compute_output(1)) node->mat2_.save(mat2);
    if (node->should_compute_output(2)) node->mat1_.save(mat1);
  }
  const std::array<Tensor, 3> inputs{bias, mat1, mat2};
  Tensor out = internal::run_op(Op::kAddmm, inputs, [&] { return alloc(Dims{mat1.size(0), mat2.size(1)}, mat1.dtype()); });
  set_history(out, node);
  return out;
}

// ATen _matmul_impl for an N-d tensor times a matrix: fold the leading dims into one (a view when
// contiguous), one mm, then _unsafe_view back.
Tensor batched_matmul(const Tensor& self, const Tensor& other);  // bmm.cpp

Tensor matmul(const Tensor& self, const Tensor& other) {
  if (self.dim() == 2 && other.dim() == 2) return mm(self, other);
  if (self.dim() >= 3 && other.dim() >= 3) return batched_matmul(self, other);
  assert(self.dim() >= 3 && other.dim() == 2);
  Dims out_sizes = leading_sizes(self);
  Tensor folded = reshape(self, Dims{leading_numel(self), self.size(-1)});
  out_sizes.push_back(other.size(1));
  return unsafe_view(mm(folded, other), out_sizes);
}

// ATen linear: addmm for 2-d input with bias; for contiguous 3-d input with bias, _flatten_nd_linear
// (reshape, addmm, view); without bias, matmul(input, weight.t()).
Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  if (!bias.defined()) return matmul(input, t(weight));
  if (input.dim() == 2) return addmm(bias, input, t(weight));
  assert(input.dim() == 3 && input.is_contiguous());
  Dims out_sizes = leading_sizes(input);
  Tensor flat = reshape(input, Dims{leading_numel(input), input.size(-1)});
  Tensor result = addmm(bias, flat, t(weight));
  out_sizes.push_back(result.size(1));
  return view(result, out_sizes);
}

}  // namespace census::ops
