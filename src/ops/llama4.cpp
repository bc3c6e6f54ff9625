// Llama 4's own ops: its NoPE layers' attention temperature (on positions, which autograd does not
// track), and its router's scatter of the top-k logits and the routed inputs' repeat. Above each
// node, the derivatives.yaml entry it follows.
#include <cassert>

#include "ops/internal.h"
#include "ops/ops.h"

namespace census::ops {
using internal::alloc;
using internal::dispatch;

namespace {

Tensor untracked_unary(Op op, const Tensor& self) {
  assert(!self.requires_grad());
  Tensor out = internal::alloc_like(self, self.dtype());
  dispatch<1, 1>(op, {self}, {out});
  return out;
}

// repeat(Tensor self, SymInt[] repeats)  self: repeat_backward(grad, repeats, self.sym_sizes())
// = grad reshaped to (r0, d0, r1, d1, ...) (each repeat of 1 left out) and summed over the repeats.
class RepeatBackward0 final : public Node {
 public:
  RepeatBackward0(uint64_t seq, Dims repeats, Dims input_sizes)
      : Node("RepeatBackward0", seq), repeats_(repeats), input_sizes_(input_sizes) {}
  GradList apply(GradList& grads) override {
    Dims grad_size;
    std::vector<int> sum_dims;
    for (int d = 0; d < input_sizes_.size(); ++d) {
      if (repeats_[d] != 1) {
        grad_size.push_back(repeats_[d]);
        sum_dims.push_back(static_cast<int>(grad_size.size()) - 1);
      }
      grad_size.push_back(input_sizes_[d]);
    }
    if (sum_dims.empty()) return {reshape(grads[0], grad_size)};
    return {sum(reshape(grads[0], grad_size), sum_dims, /*keepdim=*/false)};
  }

 private:
  Dims repeats_;
  Dims input_sizes_;
};

// scatter_.src(Tensor(a!) self, int dim, Tensor index, Tensor src)
//   self: grad.scatter(dim, index, 0)   -> saves index
//   src: grad.gather(dim, index)        -> saves index
class ScatterBackward0 final : public Node {
 public:
  ScatterBackward0(uint64_t seq, int64_t dim) : Node("ScatterBackward0", seq), dim_(dim) {}
  GradList apply(GradList& grads) override {
    const Tensor index = index_.unpack();
    // Census scatters only into a fresh tensor (full_like), whose gradient no one asks for.
    assert(!should_compute_output(0));
    GradList out(2);
    if (should_compute_output(1)) out[1] = gather(grads[0], dim_, index);
    return out;
  }
  SavedVariable index_{this};

 private:
  int64_t dim_;
};

}  // namespace

Tensor log1p(const Tensor& self) { return untracked_unary(Op::kLog1p, self); }
Tensor floor(const Tensor& self) { return untracked_unary(Op::kFloor, self); }

Tensor full_like(const Tensor& self, double /*value*/) {
  Tensor out = internal::alloc_like(self, self.dtype());
  dispatch<1, 1>(Op::kFullLike, {self}, {out});
  return out;
}

Tensor repeat(const Tensor& self, const Dims& repeats) {
  assert(repeats.size() == self.sizes().size());
  Dims sizes = self.sizes();
  for (int d = 0; d < sizes.size(); ++d) sizes[d] *= repeats[d];
  auto node = make_node<RepeatBackward0>({&self}, repeats, self.sizes());
  Tensor out = alloc(sizes, self.dtype());
  dispatch<1, 1>(Op::kRepeat, {self}, {out});
  set_history(out, node);
  return out;
}

Tensor& scatter_(Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  auto node = make_node<ScatterBackward0>({&self, &src}, dim);
  if (node) node->index_.save(index);
  dispatch<3, 1>(Op::kScatterSrcInplace, {self, index, src}, {self});
  set_history(self, node);
  return self;
}

}  // namespace census::ops
