// Matrix products: mm, addmm, bmm, _grouped_mm, and the composites that reach them (linear, matmul)
// as ATen decomposes them. Batched matmul of two tensors of three or more dims runs as ATen's
// _matmul_impl does (expand both to the broadcast batch, fold the batch into one dim, bmm,
// _unsafe_view back); the chunked gated delta rule multiplies (B, H, C, 64, D) blocks this way.
#include <cassert>

#include "ops/autocast.h"
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

// bmm(Tensor self, Tensor mat2)
//   self: grad.bmm(mat2.transpose(1, 2).conj())   -> saves mat2 iff self needs grad
//   mat2: self.transpose(1, 2).conj().bmm(grad)   -> saves self iff mat2 needs grad
// mat2's gradient first, as MmBackward0 (Note [MmBackward0 order]).
class BmmBackward0 final : public Node {
 public:
  explicit BmmBackward0(uint64_t seq) : Node("BmmBackward0", seq) {}
  GradList apply(GradList& grads) override {
    const Tensor self = self_.unpack();
    const Tensor mat2 = mat2_.unpack();
    GradList out(2);
    if (should_compute_output(1)) out[1] = bmm(transpose(self, 1, 2), grads[0]);
    if (should_compute_output(0)) out[0] = bmm(grads[0], transpose(mat2, 1, 2));
    return out;
  }
  SavedVariable self_{this};
  SavedVariable mat2_{this};
};

Dims batch_of(const Tensor& t) {
  Dims batch;
  for (int i = 0; i + 2 < t.dim(); ++i) batch.push_back(t.size(i));
  return batch;
}

// A batch of matrices (the last two dims) laid out column-major, as a transposed weight is.
bool column_major(const Tensor& t) {
  return t.stride(-2) == 1 && t.stride(-1) == t.size(-2);
}

// _grouped_mm(Tensor self, Tensor mat2, Tensor? offs, ...)
//   self: _grouped_mm_mat1_backward(grad, mat2, ..., offs)   -> saves mat2 iff self needs grad
//   mat2: _grouped_mm_mat2_backward(grad, self, ..., offs)   -> saves self iff mat2 needs grad
// offs is saved whenever either is computed.
class GroupedMmBackward0 final : public Node {
 public:
  GroupedMmBackward0(uint64_t seq, const Tensor& self, const Tensor& mat2)
      : Node("GroupedMmBackward0", seq), self_column_major_(column_major(self)), mat2_column_major_(column_major(mat2)) {}
  // As MmBackward0 (Note [MmBackward0 order]), the weight's gradient first.
  GradList apply(GradList& grads) override {
    const Tensor self = self_.unpack();
    const Tensor mat2 = mat2_.unpack();
    const Tensor offs = offs_.unpack();
    GradList out(2);
    if (should_compute_output(1)) {
      out[1] = mat2_column_major_ ? transpose(grouped_mm(t(grads[0]), self, offs), -2, -1)
                                  : grouped_mm(t(self), grads[0], offs);
    }
    if (should_compute_output(0)) {
      out[0] = self_column_major_ ? t(grouped_mm(mat2, t(grads[0]), offs))
                                  : grouped_mm(grads[0], transpose(mat2, -2, -1), offs);
    }
    return out;
  }
  SavedVariable self_{this};
  SavedVariable mat2_{this};
  SavedVariable offs_{this};

 private:
  bool self_column_major_;
  bool mat2_column_major_;
};

}  // namespace

Tensor mm(const Tensor& self, const Tensor& mat2) {
  if (const autocast::Wrap cast; cast) {
    const Tensor a = cast.lower(self), b = cast.lower(mat2);  // cast in argument order
    return mm(a, b);
  }
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
  if (const autocast::Wrap cast; cast) {
    const Tensor b = cast.lower(bias), m1 = cast.lower(mat1), m2 = cast.lower(mat2);
    return addmm(b, m1, m2);
  }
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

Tensor bmm(const Tensor& self, const Tensor& mat2) {
  if (const autocast::Wrap cast; cast) {
    const Tensor a = cast.lower(self), b = cast.lower(mat2);
    return bmm(a, b);
  }
  assert(self.dim() == 3 && mat2.dim() == 3 && self.size(2) == mat2.size(1));
  auto node = make_node<BmmBackward0>({&self, &mat2});
  if (node) {
    if (node->should_compute_output(0)) node->mat2_.save(mat2);
    if (node->should_compute_output(1)) node->self_.save(self);
  }
  const std::array<Tensor, 2> inputs{self, mat2};
  Tensor out = internal::run_op(Op::kBmm, inputs, [&] {
    return alloc(Dims{self.size(0), self.size(1), mat2.size(2)}, promote(self.dtype(), mat2.dtype()));
  });
  set_history(out, node);
  return out;
}

// _matmul_impl's batched branch (neither side folds into a matrix: both have 3+ dims).
Tensor batched_matmul(const Tensor& self, const Tensor& other) {
  const Dims batch = internal::broadcast_sizes(batch_of(self), batch_of(other));
  const int64_t n = self.size(-2), m = self.size(-1), p = other.size(-1);
  Dims self_sizes = batch, other_sizes = batch, out_sizes = batch;
  self_sizes.push_back(n);
  self_sizes.push_back(m);
  other_sizes.push_back(other.size(-2));
  other_sizes.push_back(p);
  out_sizes.push_back(n);
  out_sizes.push_back(p);
  const int64_t folded = batch.product();
  Tensor left = reshape(expand(self, self_sizes), Dims{folded, n, m});
  Tensor right = reshape(expand(other, other_sizes), Dims{folded, other.size(-2), p});
  return unsafe_view(bmm(left, right), out_sizes);
}

Tensor grouped_mm(const Tensor& self, const Tensor& mat2, const Tensor& offs) {
  auto node = make_node<GroupedMmBackward0>({&self, &mat2}, self, mat2);
  if (node) {
    if (node->should_compute_output(0)) node->mat2_.save(mat2);
    if (node->should_compute_output(1)) node->self_.save(self);
    node->offs_.save(offs);
  }
  // 2-d by 3-d: each group of rows times its expert's matrix, (S, N). 2-d by 2-d (the weight's
  // gradient): one (M, N) product per group, (E, M, N).
  const Dims sizes = mat2.dim() == 3 ? Dims{self.size(0), mat2.size(2)} : Dims{offs.size(0), self.size(0), mat2.size(1)};
  const std::array<Tensor, 3> inputs{self, mat2, offs};
  Tensor out = internal::run_op(Op::kGroupedMm, inputs, [&] { return alloc(sizes, self.dtype()); });
  set_history(out, node);
  return out;
}

// ATen _matmul_impl for an N-d tensor times a matrix: fold the leading dims into one (a view when
// contiguous), one mm, then _unsafe_view back.

Tensor matmul(const Tensor& self, const Tensor& other) {
  if (const autocast::Wrap cast; cast) {
    const Tensor a = cast.lower(self), b = cast.lower(other);
    return matmul(a, b);
  }
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
  if (const autocast::Wrap cast; cast) {
    const Tensor x = cast.lower(input), w = cast.lower(weight), b = cast.lower(bias);
    return linear(x, w, b);
  }
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
