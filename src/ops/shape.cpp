// Shape ops. Views alias their input's storage and save only sizes; cat allocates; a reshape is a
// view where strides allow, else a contiguous clone then _unsafe_view. Splits are views too, whose
// backward cats the gradients back into one allocation; constant_pad_nd and repeat_interleave
// allocate; indexed assignment (`base[index] = src`) rebases base's history onto CopySlices.
#include <cassert>

#include "ops/internal.h"
#include "ops/ops.h"

namespace census::ops {
using internal::alias;
using internal::alloc;
using internal::dispatch;

namespace {

// view / _unsafe_view (Tensor self, SymInt[] size)  self: grad.reshape_symint(self.sym_sizes())
class ReshapeBackward final : public Node {
 public:
  ReshapeBackward(uint64_t seq, std::string_view name, Dims sizes) : Node(name, seq), sizes_(sizes) {}
  GradList apply(GradList& grads) override { return {reshape(grads[0], sizes_)}; }

 private:
  Dims sizes_;
};

// t(Tensor self)  self: grad.t();  transpose.int(self, dim0, dim1)  self: grad.transpose(dim0, dim1)
class TransposeBackward final : public Node {
 public:
  TransposeBackward(uint64_t seq, std::string_view name, int dim0, int dim1)
      : Node(name, seq), dim0_(dim0), dim1_(dim1) {}
  GradList apply(GradList& grads) override {
    return {name() == "TBackward0" ? t(grads[0]) : transpose(grads[0], dim0_, dim1_)};
  }

 private:
  int dim0_, dim1_;
};

// unsqueeze(Tensor self, int dim)  self: grad.squeeze(dim)
class UnsqueezeBackward0 final : public Node {
 public:
  UnsqueezeBackward0(uint64_t seq, int dim) : Node("UnsqueezeBackward0", seq), dim_(dim) {}
  GradList apply(GradList& grads) override { return {squeeze(grads[0], dim_)}; }

 private:
  int dim_;
};

// squeeze.dim(Tensor self, int dim)  self: unsqueeze_to(grad, dim, self.sym_sizes())
class SqueezeBackward1 final : public Node {
 public:
  SqueezeBackward1(uint64_t seq, int dim) : Node("SqueezeBackward1", seq), dim_(dim) {}
  GradList apply(GradList& grads) override { return {unsqueeze(grads[0], dim_)}; }

 private:
  int dim_;
};

// slice.Tensor(self, dim, start, end, step)  self: slice_backward_wrapper(grad, self.sym_sizes(), ...)
// The backward allocates zeros of the whole input and copies the gradient into the slice.
class SliceBackward0 final : public Node {
 public:
  SliceBackward0(uint64_t seq, Dims sizes, int dim, int64_t start, int64_t end, int64_t step)
      : Node("SliceBackward0", seq), sizes_(sizes), dim_(dim), start_(start), end_(end), step_(step) {}
  GradList apply(GradList& grads) override {
    return {slice_backward(grads[0], sizes_, dim_, start_, end_, step_)};
  }

 private:
  Dims sizes_;
  int dim_;
  int64_t start_, end_, step_;
};

// expand(Tensor self, SymInt[] size)  self: at::sum_to(grad, self.sym_sizes())
class ExpandBackward0 final : public Node {
 public:
  ExpandBackward0(uint64_t seq, Dims sizes) : Node("ExpandBackward0", seq), sizes_(sizes) {}
  GradList apply(GradList& grads) override { return {sum_to(grads[0], sizes_)}; }

 private:
  Dims sizes_;
};

// cat(Tensor[] tensors, int dim)  tensors: cat_tensors_backward(grad, sizes, dtypes, dim)
// Each input's gradient is a narrow view of the incoming one: no allocation, one shared storage.
class CatBackward0 final : public Node {
 public:
  CatBackward0(uint64_t seq, std::vector<int64_t> widths, int dim)
      : Node("CatBackward0", seq), widths_(std::move(widths)), dim_(dim) {}
  GradList apply(GradList& grads) override {
    GradList out(widths_.size());
    int64_t offset = 0;
    for (size_t i = 0; i < widths_.size(); ++i) {
      if (should_compute_output(i)) out[i] = slice(grads[0], dim_, offset, offset + widths_[i]);
      offset += widths_[i];
    }
    return out;
  }

 private:
  std::vector<int64_t> widths_;
  int dim_;
};

template <class NodeT, class... Args>
Tensor view_op(Op op, const Tensor& self, const Dims& sizes, const Dims& strides, Args&&... args) {
  auto node = make_node<NodeT>({&self}, std::forward<Args>(args)...);
  Tensor out = alias(self, sizes, strides);
  dispatch<1, 1>(op, {self}, {out});
  set_history(out, node);
  return out;
}

}  // namespace

Tensor view(const Tensor& self, const Dims& sizes) {
  auto strides = internal::view_strides(self, sizes);
  assert(strides.has_value() && "view of incompatible strides");
  return view_op<ReshapeBackward>(Op::kView, self, sizes, *strides, "ViewBackward0", self.sizes());
}

namespace {

// A view onto strides already computed (reshape's fast path).
Tensor view_with_strides(const Tensor& self, const Dims& sizes, const Dims& strides) {
  return view_op<ReshapeBackward>(Op::kView, self, sizes, strides, "ViewBackward0", self.sizes());
}

}  // namespace

Tensor unsafe_view(const Tensor& self, const Dims& sizes) {
  auto strides = internal::view_strides(self, sizes);
  assert(strides.has_value());
  auto node = make_node<ReshapeBackward>({&self}, "UnsafeViewBackward0", self.sizes());
  Tensor out = alias(self, sizes, *strides);
  dispatch<1, 1>(Op::kUnsafeView, {self}, {out});
  set_history(out, node);
  return out;
}

Tensor reshape(const Tensor& self, const Dims& sizes) {
  if (auto strides = internal::view_strides(self, sizes)) return view_with_strides(self, sizes, *strides);
  return unsafe_view(clone_contiguous(self), sizes);
}

Tensor t(const Tensor& self) {
  assert(self.dim() == 2);
  Dims sizes{self.size(1), self.size(0)};
  Dims strides{self.stride(1), self.stride(0)};
  return view_op<TransposeBackward>(Op::kT, self, sizes, strides, "TBackward0", 0, 1);
}

Tensor transpose(const Tensor& self, int64_t dim0, int64_t dim1) {
  const int a = wrap_dim(dim0, self.dim()), b = wrap_dim(dim1, self.dim());
  Dims sizes = self.sizes(), strides = self.strides();
  std::swap(sizes[a], sizes[b]);
  std::swap(strides[a], strides[b]);
  return view_op<TransposeBackward>(Op::kTranspose, self, sizes, strides, "TransposeBackward0", a, b);
}

Tensor unsqueeze(const Tensor& self, int64_t dim) {
  const int d = wrap_dim(dim, self.dim() + 1);
  Dims sizes = self.sizes(), strides = self.strides();
  const int64_t stride = d < self.dim() ? self.sizes()[d] * self.strides()[d] : 1;
  sizes.insert(d, 1);
  strides.insert(d, stride);
  return view_op<UnsqueezeBackward0>(Op::kUnsqueeze, self, sizes, strides, d);
}

Tensor squeeze(const Tensor& self, int64_t dim) {
  const int d = wrap_dim(dim, self.dim());
  if (self.sizes()[d] != 1) return view_op<SqueezeBackward1>(Op::kSqueezeDim, self, self.sizes(), self.strides(), d);
  Dims sizes = self.sizes(), strides = self.strides();
  sizes.erase(d);
  strides.erase(d);
  return view_op<SqueezeBackward1>(Op::kSqueezeDim, self, sizes, strides, d);
}

Tensor slice(const Tensor& self, int64_t dim, int64_t start, int64_t end, int64_t step) {
  const int d = wrap_dim(dim, self.dim());
  end = std::min(end, self.sizes()[d]);
  Dims sizes = self.sizes(), strides = self.strides();
  sizes[d] = (end - start + step - 1) / step;
  strides[d] *= step;
  Tensor out = view_op<SliceBackward0>(Op::kSlice, self, sizes, strides, self.sizes(), d, start, end, step);
  out.impl()->storage_offset += start * self.strides()[d];
  return out;
}

Tensor slice_backward(const Tensor& grad, const Dims& input_sizes, int dim, int64_t start, int64_t end, int64_t step) {
  // ATen: zeros(input_sizes) then grad_input.slice(dim, start, end, step).copy_(grad).
  Tensor grad_input = new_zeros(grad, input_sizes);
  Tensor part = slice(grad_input, dim, start, end, step);
  copy_(part, grad);
  return grad_input;
}

Tensor expand(const Tensor& self, const Dims& sizes) {
  Dims strides = sizes;
  const int leading = sizes.size() - self.dim();
  for (int i = 0; i < sizes.size(); ++i) {
    const int j = i - leading;
    strides[i] = (j < 0 || (self.sizes()[j] == 1 && sizes[i] != 1)) ? 0 : self.strides()[j];
  }
  return view_op<ExpandBackward0>(Op::kExpand, self, sizes, strides, self.sizes());
}

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  const int d = wrap_dim(dim, tensors[0].dim());
  Dims sizes = tensors[0].sizes();
  std::vector<int64_t> widths;
  sizes[d] = 0;
  for (const Tensor& t : tensors) {
    sizes[d] += t.sizes()[d];
    widths.push_back(t.sizes()[d]);
  }
  Ref<CatBackward0> node;
  if (tensors.size() == 2) node = make_node<CatBackward0>({&tensors[0], &tensors[1]}, widths, d);
  else if (tensors.size() == 3) node = make_node<CatBackward0>({&tensors[0], &tensors[1], &tensors[2]}, widths, d);
  else if (tensors.size() == 4)
    node = make_node<CatBackward0>({&tensors[0], &tensors[1], &tensors[2], &tensors[3]}, widths, d);
  else assert(tensors.size() <= 4);
  // ATen's cat lays its result out in the memory format its inputs suggest: row-major for every
  // tensor here (a transposed input suggests no channels-last format).
  Tensor out = alloc(sizes, tensors[0].dtype());
  internal::dispatch(Op::kCat, tensors, std::span<const Tensor>(&out, 1));
  set_history(out, node);
  return out;
}

Tensor contiguous(const Tensor& self) { return self.is_contiguous() ? self : clone_contiguous(self); }

// --- Splits, padding and indexed assignment (the gated delta net, the MoE layers) ---

namespace {

// split_with_sizes(Tensor self, SymInt[] split_sizes, int dim)  and  split.Tensor(self, split_size, dim)
//   self: split_with_sizes_backward(grads, split_sizes, dim, self.sym_sizes(), self.options())
// Undefined gradients become zeros of their part's size; then one cat of them all.
class SplitBackward final : public Node {
 public:
  SplitBackward(uint64_t seq, std::string_view name, std::vector<Dims> part_sizes, int dim, DType dtype)
      : Node(name, seq), part_sizes_(std::move(part_sizes)), dim_(dim), dtype_(dtype) {
    set_num_inputs(static_cast<uint32_t>(part_sizes_.size()));
  }
  GradList apply(GradList& grads) override {
    std::vector<Tensor> parts;
    for (size_t i = 0; i < part_sizes_.size(); ++i)
      parts.push_back(i < grads.size() && grads[i].defined() ? grads[i] : zeros(part_sizes_[i], dtype_));
    return {cat(parts, dim_)};
  }

 private:
  std::vector<Dims> part_sizes_;
  int dim_;
  DType dtype_;
};

// constant_pad_nd(Tensor self, SymInt[] pad, Scalar value)  self: constant_pad_nd_backward(grad, pad)
// = constant_pad_nd(grad, -pad): a narrowed copy of the gradient (ATen clones even a zero pad).
class ConstantPadNdBackward0 final : public Node {
 public:
  ConstantPadNdBackward0(uint64_t seq, std::vector<int64_t> pad) : Node("ConstantPadNdBackward0", seq), pad_(std::move(pad)) {}
  GradList apply(GradList& grads) override {
    std::vector<int64_t> negated = pad_;
    for (int64_t& p : negated) p = -p;
    return {constant_pad_nd(grads[0], negated)};
  }

 private:
  std::vector<int64_t> pad_;
};

// Note [Indexed assignment] `base[index] = src` takes the view the index names and copy_s src into
// it. Autograd then rebases base's history: base's grad_fn becomes a CopySlices node (with a
// sequence number after the copy's), whose first edge goes where base's gradient went before and whose
// second goes to src. Its backward (torch/csrc/autograd/functions/tensor.cpp) copies the gradient into
// a new tensor of base's geometry, clones the view's slice of it for CopyBackwards, which makes zeros of
// that clone for the overwritten slice (when base needed a gradient) and hands the clone to src, and
// writes those zeros into the slice of the new tensor, which goes on to base's former history.
class CopySlices final : public Node {
 public:
  CopySlices(uint64_t seq, const Tensor& base, std::vector<IndexStep> index, bool base_requires_grad, DType src_dtype)
      : Node("CopySlices", seq), sizes_(base.sizes()), strides_(base.strides()), index_(std::move(index)),
        base_requires_grad_(base_requires_grad), src_dtype_(src_dtype) {}
  GradList apply(GradList& grads) override {
    if (!grads[0].defined()) return GradList(2);
    Tensor result = new_empty_strided(grads[0], sizes_, strides_);
    copy_(result, grads[0]);
    Tensor grad_slice = index_view(result, index_);
    GradList out(2);
    {
      Tensor cloned = clone_contiguous(grad_slice);
      Tensor zeros_for_base = base_requires_grad_ ? zeros_like(cloned) : Tensor();
      if (should_compute_output(1)) out[1] = to(cloned, src_dtype_);
      if (should_compute_output(0)) {
        copy_(grad_slice, zeros_for_base);
        out[0] = result;
      }
    }
    return out;
  }

 private:
  Dims sizes_, strides_;
  std::vector<IndexStep> index_;
  bool base_requires_grad_;
  DType src_dtype_;
};

template <class NodeT, class... Args>
Tensor view_of(Op op, const Tensor& self, const Dims& sizes, const Dims& strides, Args&&... args) {
  auto node = make_node<NodeT>({&self}, std::forward<Args>(args)...);
  Tensor out = alias(self, sizes, strides);
  dispatch<1, 1>(op, {self}, {out});
  set_history(out, node);
  return out;
}

std::vector<Tensor> split_views(Op op, std::string_view node_name, const Tensor& self,
                                const std::vector<int64_t>& split_sizes, int dim) {
  std::vector<Dims> part_sizes;
  for (int64_t width : split_sizes) {
    Dims sizes = self.sizes();
    sizes[dim] = width;
    part_sizes.push_back(sizes);
  }
  auto node = make_node<SplitBackward>({&self}, node_name, part_sizes, dim, self.dtype());
  std::vector<Tensor> parts;
  int64_t start = 0;
  for (const Dims& sizes : part_sizes) {
    parts.push_back(alias(self, sizes, self.strides()));
    parts.back().impl()->storage_offset += start * self.strides()[dim];
    start += sizes[dim];
  }
  internal::dispatch(op, std::span<const Tensor>(&self, 1), parts);
  for (size_t i = 0; i < parts.size(); ++i) set_history(parts[i], node, static_cast<uint32_t>(i));
  return parts;
}

}  // namespace

std::vector<Tensor> split_with_sizes(const Tensor& self, const std::vector<int64_t>& split_sizes, int64_t dim) {
  return split_views(Op::kSplitWithSizes, "SplitWithSizesBackward0", self, split_sizes, wrap_dim(dim, self.dim()));
}

std::vector<Tensor> split(const Tensor& self, int64_t split_size, int64_t dim) {
  const int d = wrap_dim(dim, self.dim());
  std::vector<int64_t> split_sizes;
  for (int64_t start = 0; start < self.size(d); start += split_size)
    split_sizes.push_back(std::min(split_size, self.size(d) - start));
  return split_views(Op::kSplit, "SplitBackward0", self, split_sizes, d);
}

std::vector<Tensor> tensor_split(const Tensor& self, int64_t sections, int64_t dim) {
  const int d = wrap_dim(dim, self.dim());
  const int64_t size = self.size(d);
  std::vector<Tensor> parts;
  for (int64_t part = 0, start = 0; part < sections; ++part) {
    const int64_t length = size / sections + (part < size % sections ? 1 : 0);
    parts.push_back(slice(self, d, start, start + length));
    start += length;
  }
  return parts;
}

std::vector<Tensor> chunk(const Tensor& self, int64_t chunks, int64_t dim) {
  const int d = wrap_dim(dim, self.dim());
  const int64_t size = self.size(d);
  const int64_t split_size = (size + chunks - 1) / chunks;
  std::vector<int64_t> split_sizes;
  for (int64_t start = 0; start < size; start += split_size) split_sizes.push_back(std::min(split_size, size - start));
  return split_views(Op::kSplit, "SplitBackward0", self, split_sizes, d);
}

Tensor repeat_interleave(const Tensor& self, int64_t repeats, int64_t dim) {
  const int d = wrap_dim(dim, self.dim());
  Tensor input = unsqueeze(self, d + 1);
  Dims expanded = input.sizes();
  expanded[d + 1] = repeats;
  input = expand(input, expanded);
  Dims flat = self.sizes();
  flat[d] *= repeats;
  return reshape(clone_contiguous(input), flat);  // flatten(d, d + 1) of a contiguous tensor: a view
}

Tensor constant_pad_nd(const Tensor& self, const std::vector<int64_t>& pad) {
  Dims sizes = self.sizes();
  for (size_t i = 0; i < pad.size() / 2; ++i) sizes[self.dim() - 1 - static_cast<int>(i)] += pad[2 * i] + pad[2 * i + 1];
  auto node = make_node<ConstantPadNdBackward0>({&self}, pad);
  Tensor out = alloc(sizes, self.dtype());
  dispatch<1, 1>(Op::kConstantPadNd, {self}, {out});
  set_history(out, node);
  return out;
}

Tensor index_view(const Tensor& base, std::span<const IndexStep> index) {
  Tensor view = base;
  for (const IndexStep& step : index)
    view = step.select ? select(view, step.dim, step.start) : slice(view, step.dim, step.start, step.end);
  return view;
}

void assign_index(Tensor& base, std::initializer_list<IndexStep> index, const Tensor& src) {
  const std::vector<IndexStep> steps(index);
  Tensor view = index_view(base, steps);
  copy_(view, src);
  GraphContext& graph = GraphContext::current();
  if (!graph.grad_enabled() || (!base.requires_grad() && !src.requires_grad())) return;
  graph.next_sequence_nr();  // CopyBackwards, which CopySlices holds and runs in its backward
  auto node = arena_shared<CopySlices>(graph.next_sequence_nr(), base, steps, base.requires_grad(), src.dtype());
  node->next_edges().push_back(gradient_edge(base));
  node->next_edges().push_back(gradient_edge(src));
  set_history(base, node, 0);
}

}  // namespace census::ops
