// The ops of Transformers' eager experts loop: the routing mask (one_hot, permute, nonzero), the
// loop over the experts hit (unbind, select), and the scatter of each expert's output (index_add_).
// Above each node, the derivatives.yaml entry it follows.
#include <cassert>

#include "ops/internal.h"
#include "ops/ops.h"

namespace census::ops {
using internal::alias;
using internal::alloc;
using internal::dispatch;

namespace {

// select.int(Tensor(a) self, int dim, SymInt index)  self: select_backward(grad, self.sizes(), dim, index)
// = zeros of self's sizes, the gradient copied into the selected slice: one new tensor of self's sizes,
// wherever the slice is.
class SelectBackward0 final : public Node {
 public:
  SelectBackward0(uint64_t seq, Dims self_sizes) : Node("SelectBackward0", seq), self_sizes_(self_sizes) {}
  GradList apply(GradList& grads) override {
    Tensor grad_input = alloc(self_sizes_, grads[0].dtype());
    dispatch<1, 1>(Op::kSelectBackward, {grads[0]}, {grad_input});
    return {grad_input};
  }

 private:
  Dims self_sizes_;
};

// index_select(Tensor self, int dim, Tensor index)
//   self: index_select_backward_symint(grad, self.sym_sizes(), dim, index)   -> saves index
// = grad.new_zeros(sizes).index_add(dim, index, grad) (Note [Subclass-like under fake tensors],
// ops/routing.cpp): the zeros go once the sum is made.
class IndexSelectBackward0 final : public Node {
 public:
  IndexSelectBackward0(uint64_t seq, Dims self_sizes) : Node("IndexSelectBackward0", seq), self_sizes_(self_sizes) {}
  GradList apply(GradList& grads) override {
    const Tensor index = index_.unpack();
    return {index_add(new_zeros(grads[0], self_sizes_), index, grads[0])};
  }
  SavedVariable index_{this};

 private:
  Dims self_sizes_;
};

// index_add(Tensor self, int dim, Tensor index, Tensor source, *, Scalar alpha)
//   self: grad
//   source: maybe_multiply(grad.index_select(dim, index).expand_as(source), alpha)
// -> saves index, and source (whose expand_as needs the tensor itself, not only its sizes).
class IndexAddBackward0 final : public Node {
 public:
  explicit IndexAddBackward0(uint64_t seq) : Node("IndexAddBackward0", seq) {}
  GradList apply(GradList& grads) override {
    const Tensor index = index_.unpack();
    const Tensor source = source_.unpack();
    GradList out(2);
    if (should_compute_output(0)) out[0] = grads[0];
    if (should_compute_output(1)) out[1] = index_select(grads[0], index);
    return out;
  }
  SavedVariable index_{this};
  SavedVariable source_{this};
};

// unbind.int(Tensor(a -> *) self, int dim)  self: unbind_backward(grads, dim)
// = stack of the parts' gradients (zeros where one is undefined) -> saves nothing.
class UnbindBackward0 final : public Node {
 public:
  UnbindBackward0(uint64_t seq, Dims self_sizes, int dim, DType dtype)
      : Node("UnbindBackward0", seq), self_sizes_(self_sizes), dim_(dim), dtype_(dtype) {
    set_num_inputs(static_cast<uint32_t>(self_sizes_[dim_]));
  }
  GradList apply(GradList& grads) override {
    Dims part = self_sizes_;
    part.erase(dim_);
    std::vector<Tensor> parts;
    for (int64_t i = 0; i < self_sizes_[dim_]; ++i) {
      const size_t at = static_cast<size_t>(i);
      parts.push_back(at < grads.size() && grads[at].defined() ? grads[at] : zeros(part, dtype_));
    }
    Tensor stacked = alloc(self_sizes_, dtype_);
    internal::dispatch(Op::kStack, parts, std::span<const Tensor>(&stacked, 1));
    return {stacked};
  }

 private:
  Dims self_sizes_;
  int dim_;
  DType dtype_;
};

}  // namespace

void item(const Tensor& self) { dispatch<1, 0>(Op::kLocalScalarDense, {self}, {}); }

Tensor one_hot(const Tensor& self, int64_t num_classes) {
  {
    // The indices' range: min >= 0 and max < num_classes, each read back.
    Tensor min = alloc(Dims{}, self.dtype()), max = alloc(Dims{}, self.dtype());
    dispatch<1, 2>(Op::kAminmax, {self}, {min, max});
    item(min);
    item(max);
  }
  Dims sizes = self.sizes();
  sizes.push_back(num_classes);
  Tensor out = zeros(sizes, DType::kInt64);
  scatter_(out, -1, unsqueeze(self, -1), 1.0);
  return out;
}

namespace {

// permute(Tensor(a) self, int[] dims)  self: permute_backwards(grad, dims)
// = the gradient permuted back by the inverse dims: a view, no allocation. (The routing mask's permute
// is of integer tensors and records none.)
class PermuteBackward0 final : public Node {
 public:
  PermuteBackward0(uint64_t seq, std::vector<int> dims) : Node("PermuteBackward0", seq), dims_(std::move(dims)) {}
  GradList apply(GradList& grads) override {
    std::vector<int> inverse(dims_.size());
    for (size_t i = 0; i < dims_.size(); ++i) inverse[static_cast<size_t>(dims_[i])] = static_cast<int>(i);
    return {permute(grads[0], inverse)};
  }

 private:
  std::vector<int> dims_;
};

}  // namespace

Tensor permute(const Tensor& self, const std::vector<int>& dims) {
  std::vector<int> wrapped;
  for (int d : dims) wrapped.push_back(wrap_dim(d, self.dim()));
  auto node = make_node<PermuteBackward0>({&self}, wrapped);
  Dims sizes, strides;
  for (int d : wrapped) {
    sizes.push_back(self.sizes()[d]);
    strides.push_back(self.strides()[d]);
  }
  Tensor out = alias(self, sizes, strides);
  dispatch<1, 1>(Op::kPermute, {self}, {out});
  set_history(out, node);
  return out;
}

Tensor nonzero(const Tensor& self, int64_t count) {
  Tensor out = alloc(Dims{count, self.dim()}, DType::kInt64);
  dispatch<1, 1>(Op::kNonzero, {self}, {out});
  return out;
}

Tensor gt(const Tensor& self, double /*other*/) {
  Tensor out = alloc(self.sizes(), DType::kBool);
  dispatch<1, 1>(Op::kGtScalar, {self}, {out});
  return out;
}

Tensor eq(const Tensor& self, double /*other*/) {
  Tensor out = alloc(self.sizes(), DType::kBool);
  dispatch<1, 1>(Op::kEqScalar, {self}, {out});
  return out;
}

Tensor select(const Tensor& self, int64_t dim, int64_t index) {
  const int d = wrap_dim(dim, self.dim());
  if (index < 0) index += self.size(d);
  auto node = make_node<SelectBackward0>({&self}, self.sizes());
  Dims sizes = self.sizes(), strides = self.strides();
  sizes.erase(d);
  strides.erase(d);
  Tensor out = alias(self, sizes, strides);
  out.impl()->storage_offset += index * self.strides()[d];
  dispatch<1, 1>(Op::kSelect, {self}, {out});
  set_history(out, node);
  return out;
}

std::vector<Tensor> unbind(const Tensor& self, int64_t dim) {
  const int d = wrap_dim(dim, self.dim());
  auto node = make_node<UnbindBackward0>({&self}, self.sizes(), d, self.dtype());
  Dims sizes = self.sizes(), strides = self.strides();
  sizes.erase(d);
  strides.erase(d);
  std::vector<Tensor> out;
  for (int64_t i = 0; i < self.sizes()[d]; ++i) {
    out.push_back(alias(self, sizes, strides));
    out.back().impl()->storage_offset += i * self.strides()[d];
  }
  internal::dispatch(Op::kUnbind, std::span<const Tensor>(&self, 1), out);
  for (size_t i = 0; i < out.size(); ++i) set_history(out[i], node, static_cast<uint32_t>(i));
  return out;
}

Tensor& index_add_(Tensor& self, const Tensor& index, const Tensor& source) {
  auto node = make_node<IndexAddBackward0>({&self, &source});
  if (node) {
    node->index_.save(index);
    if (node->should_compute_output(1)) node->source_.save(source);
  }
  dispatch<3, 1>(Op::kIndexAddInplace, {self, index, source}, {self});
  set_history(self, node);
  return self;
}

Tensor index_add(const Tensor& self, const Tensor& index, const Tensor& source) {
  Tensor out = alloc(self.sizes(), self.dtype());
  dispatch<3, 1>(Op::kIndexAdd, {self, index, source}, {out});
  return out;
}

Tensor index_select(const Tensor& self, const Tensor& index) {
  auto node = make_node<IndexSelectBackward0>({&self}, self.sizes());
  if (node) node->index_.save(index);
  Dims sizes = self.sizes();
  sizes[0] = index.size(0);
  Tensor out = alloc(sizes, self.dtype());
  dispatch<2, 1>(Op::kIndexSelect, {self, index}, {out});
  set_history(out, node);
  return out;
}

}  // namespace census::ops
