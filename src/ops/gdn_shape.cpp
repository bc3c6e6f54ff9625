// Shape ops of the gated delta net and the MoE layers: split, repeat_interleave, constant_pad_nd, and indexed
// assignment (`base[index] = src`), whose autograd is CopySlices. Views alias their input's storage;
// a split's backward cats its gradients back into one allocation.
#include <cassert>

#include "ops/internal.h"
#include "ops/ops.h"

namespace census::ops {
using internal::alias;
using internal::alloc;
using internal::dispatch;

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
  for (const Dims& sizes : part_sizes) parts.push_back(alias(self, sizes, self.strides()));
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
