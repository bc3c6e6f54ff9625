// The ops of a mixture-of-experts layer's router: activations (softmax, div), selection (topk, sort,
// gather, index), scatter, and its bookkeeping on integer tensors. Above each node, the
// derivatives.yaml entry it follows.
//
// Note [Subclass-like under fake tensors] FunctionsManual takes an out-of-place path when any tensor
// is "subclass-like", which every tensor is under a dispatch mode such as the census's fake tensors:
// index_backward runs index_put (not _index_put_impl_ in place), the topk and gather backwards
// scatter into a fresh tensor. Each of these allocates once more than the in-place path would.
#include <cassert>

#include "ops/autocast.h"
#include "ops/internal.h"
#include "ops/ops.h"

namespace census::ops {
using internal::alias;
using internal::alloc;
using internal::dispatch;

namespace {

// _softmax(Tensor self, int dim, bool half_to_float)
//   self: _softmax_backward_data(grad, result, dim, self.scalar_type())   -> saves result
class SoftmaxBackward0 final : public Node {
 public:
  SoftmaxBackward0(uint64_t seq, DType self_dtype) : Node("SoftmaxBackward0", seq), self_dtype_(self_dtype) {}
  GradList apply(GradList& grads) override {
    const Tensor result = result_.unpack();
    Tensor out = internal::alloc_like(grads[0], self_dtype_);
    dispatch<2, 1>(Op::kSoftmaxBackward, {grads[0], result}, {out});
    return {out};
  }
  SavedVariable result_{this};

 private:
  DType self_dtype_;
};

// div.Tensor / div_.Tensor (Tensor self, Tensor other)
//   self: div_tensor_self_backward(grad, other, ...)   -> saves other iff self needs grad
//   other: div_tensor_other_backward(grad, self, other) -> saves self iff other needs grad
// In place, self is the clone autograd takes before the op overwrites it (original_self).
class DivBackward0 final : public Node {
 public:
  explicit DivBackward0(uint64_t seq) : Node("DivBackward0", seq) {}
  GradList apply(GradList& grads) override {
    const Tensor self = self_.unpack();
    const Tensor other = other_.unpack();
    GradList out(2);
    // As the oracle's allocation log shows, other's gradient first: -grad * ((self / other) / other),
    // whose three temporaries die together at the end of the expression.
    if (should_compute_output(1)) {
      Tensor ratio = div(self, other);
      Tensor ratio_over_other = div(ratio, other);
      Tensor negated = neg(grads[0]);
      out[1] = mul(negated, ratio_over_other);
    }
    if (should_compute_output(0)) out[0] = div(grads[0], other);
    return out;
  }
  SavedVariable self_{this};
  SavedVariable other_{this};
};

// topk(Tensor self, int k, int dim, bool largest, bool sorted)
//   self: value_selecting_reduction_backward(grad, dim, indices, self.sizes(), true)  -> saves indices
// = grad.new_zeros(sizes).scatter(dim, indices, grad) (Note [Subclass-like under fake tensors]).
class TopkBackward0 final : public Node {
 public:
  TopkBackward0(uint64_t seq, Dims self_sizes) : Node("TopkBackward0", seq), self_sizes_(self_sizes) {}
  GradList apply(GradList& grads) override {
    const Tensor indices = indices_.unpack();
    Tensor zeros = new_zeros(grads[0], self_sizes_);
    return {scatter(zeros, -1, indices, grads[0])};
  }
  SavedVariable indices_{this};

 private:
  Dims self_sizes_;
};

// index.Tensor(Tensor self, Tensor?[] indices)
//   self: index_backward(grad.new_zeros(self.sizes()), indices, grad)   -> saves indices
class IndexBackward0 final : public Node {
 public:
  IndexBackward0(uint64_t seq, Dims self_sizes, size_t indices)
      : Node("IndexBackward0", seq), indices_(this, indices), self_sizes_(self_sizes) {}
  GradList apply(GradList& grads) override {
    std::vector<Tensor> indices;
    for (SavedVariable& index : indices_) indices.push_back(index.unpack());
    Tensor zeros = new_zeros(grads[0], self_sizes_);
    return {index_put(zeros, indices[0], grads[0])};
  }
  SavedVariableList indices_;

 private:
  Dims self_sizes_;
};

// gather(Tensor self, int dim, Tensor index, bool sparse_grad)
//   self: gather_backward(grad, self, dim, index, sparse_grad)   -> saves self and index
// = zeros_like(self).scatter_add(dim, index, grad) (Note [Subclass-like under fake tensors]).
class GatherBackward0 final : public Node {
 public:
  GatherBackward0(uint64_t seq, int dim) : Node("GatherBackward0", seq), dim_(dim) {}
  GradList apply(GradList& grads) override {
    const Tensor self = self_.unpack();
    const Tensor index = index_.unpack();
    Tensor zeros = zeros_like(self);
    return {scatter_add(zeros, dim_, index, grads[0])};
  }
  SavedVariable self_{this};
  SavedVariable index_{this};

 private:
  int dim_;
};

// masked_fill_.Scalar(Tensor self, Tensor mask, Scalar value)  self: grad.masked_fill(mask, 0)  -> saves mask
class MaskedFillBackward0 final : public Node {
 public:
  explicit MaskedFillBackward0(uint64_t seq) : Node("MaskedFillBackward0", seq) {}
  GradList apply(GradList& grads) override {
    const Tensor mask = mask_.unpack();
    return {masked_fill(grads[0], mask)};
  }
  SavedVariable mask_{this};
};

// clamp(Tensor self, Scalar? min, Scalar? max)  self: clamp_backward(grad, self, min, max)  -> saves self
// = where(in range, grad, zero): a 0-d zero, one bool mask per bound (and-ed in place), the result.
class ClampBackward1 final : public Node {
 public:
  ClampBackward1(uint64_t seq, bool has_min, bool has_max) : Node("ClampBackward1", seq), has_min_(has_min), has_max_(has_max) {}
  GradList apply(GradList& grads) override {
    const Tensor self = self_.unpack();
    const Tensor& grad = grads[0];
    Tensor zero = alloc(Dims{}, grad.dtype());
    dispatch<0, 1>(Op::kScalarTensor, {}, {zero});
    Tensor above, below;
    if (has_min_) {
      above = internal::alloc_like(self, DType::kBool);
      dispatch<1, 1>(Op::kGtScalar, {self}, {above});
    }
    if (has_max_) {
      below = internal::alloc_like(self, DType::kBool);
      dispatch<1, 1>(Op::kLtScalar, {self}, {below});
    }
    if (above.defined() && below.defined()) dispatch<2, 1>(Op::kLogicalAndInplace, {above, below}, {above});
    const Tensor& mask = above.defined() ? above : below;
    Tensor out = internal::alloc_like(grad, grad.dtype());
    dispatch<3, 1>(Op::kWhere, {mask, grad, zero}, {out});
    return {out};
  }
  SavedVariable self_{this};

 private:
  bool has_min_, has_max_;
};

}  // namespace

// Over any dim: the result has the input's shape either way (DeepSeek-V4's compressors take dim 2).
Tensor softmax(const Tensor& self, int64_t dim, std::optional<DType> dtype) {
  if (const autocast::Wrap cast; cast) return softmax(self, dim, dtype ? dtype : cast.opt_dtype(self));
  const Tensor converted = dtype ? to(self, *dtype) : self;
  auto node = make_node<SoftmaxBackward0>({&converted}, converted.dtype());
  Tensor out = internal::alloc_like(converted, converted.dtype());
  dispatch<1, 1>(Op::kSoftmax, {converted}, {out});
  set_history(out, node);
  if (node) node->result_.save(out, /*is_output=*/true);
  return out;
}

Tensor div(const Tensor& self, const Tensor& other) {
  auto node = make_node<DivBackward0>({&self, &other});
  if (node) {
    if (node->should_compute_output(0)) node->other_.save(other);
    if (node->should_compute_output(1)) node->self_.save(self);
  }
  const Dims sizes = internal::broadcast_sizes(self.sizes(), other.sizes());
  Tensor out = alloc(sizes, internal::elementwise_strides(sizes, {&self, &other}), promote(self.dtype(), other.dtype()));
  dispatch<2, 1>(Op::kDivTensor, {self, other}, {out});
  set_history(out, node);
  return out;
}

Tensor& div_(Tensor& self, const Tensor& other) {
  auto node = make_node<DivBackward0>({&self, &other});
  if (node) {
    if (node->should_compute_output(0)) node->other_.save(other);
    if (node->should_compute_output(1)) node->self_.save(clone(self.detach()));
  }
  dispatch<2, 1>(Op::kDivInplace, {self, other}, {self});
  set_history(self, node);
  return self;
}

Tensor ge(const Tensor& self, double /*other*/) {
  Tensor out = internal::alloc_like(self, DType::kBool);
  dispatch<1, 1>(Op::kGeScalar, {self}, {out});
  return out;
}

Tensor floor_divide(const Tensor& self, int64_t /*other*/) {
  Tensor out = internal::alloc_like(self, self.dtype());
  dispatch<1, 1>(Op::kFloorDivide, {self}, {out});
  return out;
}

Tensor& clamp_max_(Tensor& self, double /*max*/) {
  dispatch<1, 1>(Op::kClampInplace, {self}, {self});
  return self;
}

Tensor bitwise_not(const Tensor& self) {
  Tensor out = internal::alloc_like(self, self.dtype());
  dispatch<1, 1>(Op::kBitwiseNot, {self}, {out});
  return out;
}

Tensor clamp(const Tensor& self, std::optional<double> min, std::optional<double> max) {
  auto node = make_node<ClampBackward1>({&self}, min.has_value(), max.has_value());
  if (node) node->self_.save(self);
  Tensor out = internal::alloc_like(self, self.dtype());
  dispatch<1, 1>(Op::kClamp, {self}, {out});
  set_history(out, node);
  return out;
}

ValuesIndices topk(const Tensor& self, int64_t k) {
  auto node = make_node<TopkBackward0>({&self}, self.sizes());
  Dims sizes = self.sizes();
  sizes[sizes.size() - 1] = k;
  ValuesIndices out{alloc(sizes, self.dtype()), alloc(sizes, DType::kInt64)};
  dispatch<1, 2>(Op::kTopk, {self}, {out.values, out.indices});
  set_history(out.values, node);
  if (node) node->indices_.save(out.indices, /*is_output=*/true);
  return out;
}

ValuesIndices sort(const Tensor& self) {
  assert(!self.requires_grad());
  ValuesIndices out{alloc(self.sizes(), self.dtype()), alloc(self.sizes(), DType::kInt64)};
  dispatch<1, 2>(Op::kSort, {self}, {out.values, out.indices});
  return out;
}

Tensor index(const Tensor& self, const Tensor& index) { return ops::index(self, std::vector<Tensor>{index}); }

Tensor index(const Tensor& self, const std::vector<Tensor>& indices) {
  assert(!indices.empty() && (indices.size() == 1 || indices[0].dim() == 1) && indices[0].dtype() == DType::kInt64);
  auto node = make_node<IndexBackward0>({&self}, self.sizes(), indices.size());
  if (node)
    for (size_t i = 0; i < indices.size(); ++i) node->indices_[i].save(indices[i]);
  Dims sizes = indices[0].sizes();
  for (int d = static_cast<int>(indices.size()); d < self.dim(); ++d) sizes.push_back(self.sizes()[d]);
  Tensor out = alloc(sizes, self.dtype());
  std::vector<Tensor> inputs{self};
  inputs.insert(inputs.end(), indices.begin(), indices.end());
  internal::dispatch(Op::kIndexTensor, inputs, std::span<const Tensor>(&out, 1));
  set_history(out, node);
  return out;
}

Tensor& index_put_(Tensor& self, const Tensor& index, const Tensor& values) {
  assert(!self.requires_grad() && !values.requires_grad());
  dispatch<3, 1>(Op::kIndexPutInplace, {self, index, values}, {self});
  return self;
}

Tensor index_put(const Tensor& self, const Tensor& index, const Tensor& values) {
  Tensor out = internal::alloc_like(self, self.dtype());
  dispatch<3, 1>(Op::kIndexPut, {self, index, values}, {out});
  return out;
}

Tensor gather(const Tensor& self, int64_t dim, const Tensor& index) {
  const int d = wrap_dim(dim, self.dim());
  auto node = make_node<GatherBackward0>({&self}, d);
  if (node) {
    node->self_.save(self);
    node->index_.save(index);
  }
  Tensor out = alloc(index.sizes(), self.dtype());
  dispatch<2, 1>(Op::kGather, {self, index}, {out});
  set_history(out, node);
  return out;
}

Tensor scatter(const Tensor& self, int64_t /*dim*/, const Tensor& index, const Tensor& src) {
  Tensor out = internal::alloc_like(self, self.dtype());
  dispatch<3, 1>(Op::kScatter, {self, index, src}, {out});
  return out;
}

Tensor scatter_add(const Tensor& self, int64_t /*dim*/, const Tensor& index, const Tensor& src) {
  Tensor out = internal::alloc_like(self, self.dtype());
  dispatch<3, 1>(Op::kScatterAdd, {self, index, src}, {out});
  return out;
}

Tensor& scatter_(Tensor& self, int64_t /*dim*/, const Tensor& index, double /*value*/) {
  dispatch<2, 1>(Op::kScatterInplace, {self, index}, {self});
  return self;
}

Tensor& masked_fill_(Tensor& self, const Tensor& mask, double /*value*/) {
  auto node = make_node<MaskedFillBackward0>({&self});
  if (node) node->mask_.save(mask);
  dispatch<2, 1>(Op::kMaskedFillInplace, {self, mask}, {self});
  set_history(self, node);
  return self;
}

Tensor histc(const Tensor& self, int64_t bins) {
  Tensor out = alloc(Dims{bins}, self.dtype());
  dispatch<1, 1>(Op::kHistc, {self}, {out});
  return out;
}

}  // namespace census::ops
