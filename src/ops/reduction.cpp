// Reductions. Their nodes save sizes only: torch 2 keeps no input for mean's backward.
#include <algorithm>

#include "ops/autocast.h"
#include "ops/internal.h"
#include "ops/ops.h"

namespace census::ops {
using internal::alloc;
using internal::dispatch;
using internal::reduced_sizes;

namespace {

// sum_backward: the gradient unsqueezed back to the reduced dims (when not kept) and expanded to
// the input's sizes. Views: no allocation.
Tensor sum_backward(const Tensor& grad, const Dims& sizes, const std::vector<int>& dims, bool keepdim) {
  Tensor g = grad;
  if (!keepdim) {
    std::vector<int> sorted = dims;
    std::sort(sorted.begin(), sorted.end());
    for (int d : sorted) g = unsqueeze(g, d);
  }
  return expand(g, sizes);
}

// mean.dim(Tensor self, int[1]? dim, bool keepdim)
//   self: mean_backward(grad, self.sym_sizes(), dim, self.sym_numel(), keepdim)
// = sum_backward(...) / n: the division allocates the whole input size.
class MeanBackward1 final : public Node {
 public:
  MeanBackward1(uint64_t seq, Dims sizes, int dim, bool keepdim)
      : Node("MeanBackward1", seq), sizes_(sizes), dim_(dim), keepdim_(keepdim) {}
  GradList apply(GradList& grads) override {
    return {div(sum_backward(grads[0], sizes_, {dim_}, keepdim_), static_cast<double>(sizes_[dim_]))};
  }

 private:
  Dims sizes_;
  int dim_;
  bool keepdim_;
};

// sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim)  self: sum_backward(grad, sizes, dim, keepdim)
class SumBackward1 final : public Node {
 public:
  SumBackward1(uint64_t seq, Dims sizes, std::vector<int> dims, bool keepdim)
      : Node("SumBackward1", seq), sizes_(sizes), dims_(std::move(dims)), keepdim_(keepdim) {}
  GradList apply(GradList& grads) override {
    return {sum_backward(grads[0], sizes_, dims_, keepdim_)};
  }

 private:
  Dims sizes_;
  std::vector<int> dims_;
  bool keepdim_;
};

}  // namespace

namespace internal {

Dims reduced_sizes(const Dims& sizes, const std::vector<int>& dims, bool keepdim) {
  Dims out;
  for (int i = 0; i < sizes.size(); ++i) {
    const bool reduced = std::find(dims.begin(), dims.end(), i) != dims.end();
    if (!reduced) out.push_back(sizes[i]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

}  // namespace internal

Tensor mean(const Tensor& self, int64_t dim, bool keepdim) {
  const int d = wrap_dim(dim, self.dim());
  auto node = make_node<MeanBackward1>({&self}, self.sizes(), d, keepdim);
  Tensor out = alloc(reduced_sizes(self.sizes(), {d}, keepdim), self.dtype());
  dispatch<1, 1>(Op::kMeanDim, {self}, {out});
  set_history(out, node);
  return out;
}

Tensor sum(const Tensor& self, const std::vector<int>& dims, bool keepdim) {
  DType dtype = self.dtype();  // sum.dim_IntList(..., dtype=None); under autocast, fp32 (fp32_set_opt_dtype)
  if (const autocast::Wrap cast; cast) dtype = cast.opt_dtype(self);
  auto node = make_node<SumBackward1>({&self}, self.sizes(), dims, keepdim);
  Tensor out = alloc(reduced_sizes(self.sizes(), dims, keepdim), dtype);
  dispatch<1, 1>(Op::kSumDimIntList, {self}, {out});
  set_history(out, node);
  return out;
}

// at::sum_to: leading dims and size-1 dims of `sizes` are summed (keepdim), then viewed to `sizes`.
Tensor sum_to(const Tensor& self, const Dims& sizes) {
  const int leading = self.dim() - sizes.size();
  std::vector<int> dims;
  for (int i = 0; i < leading; ++i) dims.push_back(i);
  for (int i = leading; i < self.dim(); ++i)
    if (sizes[i - leading] == 1 && self.sizes()[i] != 1) dims.push_back(i);
  Tensor out = dims.empty() ? self : sum(self, dims, /*keepdim=*/true);
  return leading > 0 ? view(out, sizes) : out;
}

}  // namespace census::ops
