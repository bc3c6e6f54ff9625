// The loss's ops: log_softmax and nll_loss (what F.cross_entropy decomposes into), the pad of the
// labels Transformers' causal-LM loss shifts them with, and the comparisons, sort and argmax TRL's
// chunked loss runs on its labels and logits (none of which autograd tracks).
#include <cassert>

#include "ops/autocast.h"
#include "ops/internal.h"
#include "ops/ops.h"

namespace census::ops {
using internal::alloc;
using internal::dispatch;

namespace {

// _log_softmax(Tensor self, int dim, bool half_to_float)
//   self: _log_softmax_backward_data(grad, result, dim, self.scalar_type())   -> saves result
class LogSoftmaxBackward0 final : public Node {
 public:
  LogSoftmaxBackward0(uint64_t seq, DType self_dtype) : Node("LogSoftmaxBackward0", seq), self_dtype_(self_dtype) {}
  GradList apply(GradList& grads) override {
    const Tensor result = result_.unpack();
    Tensor out = alloc(grads[0].sizes(), self_dtype_);
    dispatch<2, 1>(Op::kLogSoftmaxBackward, {grads[0], result}, {out});
    return {out};
  }
  SavedVariable result_{this};

 private:
  DType self_dtype_;
};

// nll_loss_forward(Tensor self, Tensor target, Tensor? weight, int reduction, SymInt ignore_index)
//   self: nll_loss_backward(grad, self, target, weight, reduction, ignore_index, total_weight)
// saves self, target and total_weight (weight is undefined); the backward allocates zeros of self.
class NllLossBackward0 final : public Node {
 public:
  explicit NllLossBackward0(uint64_t seq) : Node("NllLossBackward0", seq) {}
  GradList apply(GradList& grads) override {
    const Tensor self = self_.unpack();
    const Tensor target = target_.unpack();
    const Tensor total_weight = total_weight_.unpack();
    Tensor out = alloc(self.sizes(), self.dtype());
    dispatch<4, 1>(Op::kNllLossBackward, {grads[0], self, target, total_weight}, {out});
    return {out};
  }
  SavedVariable self_{this};
  SavedVariable target_{this};
  SavedVariable total_weight_{this};
};

}  // namespace

Tensor ones_like(const Tensor& self) {
  Tensor out = alloc(self.sizes(), internal::dense_strides_like(self, self.sizes()), self.dtype());
  dispatch<1, 1>(Op::kOnesLike, {self}, {out});
  return out;
}

Tensor constant_pad(const Tensor& self, int64_t left, int64_t right) { return constant_pad_nd(self, {left, right}); }

Tensor log_softmax(const Tensor& self, int64_t dim) {
  // log_softmax.int(self, dim, dtype=None): under autocast, dtype fp32, and _log_softmax of self.to(dtype).
  if (const autocast::Wrap cast; cast) return log_softmax(to(self, cast.opt_dtype(self)), dim);
  auto node = make_node<LogSoftmaxBackward0>({&self}, self.dtype());
  Tensor out = alloc(self.sizes(), self.dtype());
  dispatch<1, 1>(Op::kLogSoftmax, {self}, {out});
  set_history(out, node);
  if (node) node->result_.save(out, /*is_output=*/true);
  return out;
}

Tensor nll_loss(const Tensor& self, const Tensor& target) {
  if (const autocast::Wrap cast; cast) return nll_loss(cast.fp32(self), target);
  auto node = make_node<NllLossBackward0>({&self});
  if (node) {
    node->self_.save(self);
    node->target_.save(target);
  }
  Tensor output = alloc(Dims{}, self.dtype());
  Tensor total_weight = alloc(Dims{}, self.dtype());
  dispatch<2, 2>(Op::kNllLossForward, {self, target}, {output, total_weight});
  set_history(output, node);
  if (node) node->total_weight_.save(total_weight, /*is_output=*/true);
  return output;
}

Tensor cross_entropy(const Tensor& self, const Tensor& target) { return nll_loss(log_softmax(self, 1), target); }

Tensor ne(const Tensor& self, double /*other*/) {
  Tensor out = alloc(self.sizes(), DType::kBool);
  dispatch<1, 1>(Op::kNeScalar, {self}, {out});
  return out;
}

Tensor eq(const Tensor& self, const Tensor& other) {
  Tensor out = alloc(internal::broadcast_sizes(self.sizes(), other.sizes()), DType::kBool);
  dispatch<2, 1>(Op::kEqTensor, {self, other}, {out});
  return out;
}

Tensor bitwise_and(const Tensor& self, const Tensor& other) {
  Tensor out = alloc(internal::broadcast_sizes(self.sizes(), other.sizes()), promote(self.dtype(), other.dtype()));
  dispatch<2, 1>(Op::kBitwiseAndTensor, {self, other}, {out});
  return out;
}

Tensor argmax(const Tensor& self, int64_t dim) {
  Dims sizes = self.sizes();
  sizes.erase(wrap_dim(dim, self.dim()));
  Tensor out = alloc(sizes, DType::kInt64);
  dispatch<1, 1>(Op::kArgmax, {self}, {out});
  return out;
}

Tensor ceil(const Tensor& self) {
  assert(!self.requires_grad());
  Tensor out = internal::alloc_like(self, self.dtype());
  dispatch<1, 1>(Op::kCeil, {self}, {out});
  return out;
}

Tensor argsort_stable(const Tensor& self) {
  // argsort(stable=True) is sort(stable=True)'s indices: the sorted values are made, and go at once.
  assert(!self.requires_grad());
  Tensor values = alloc(self.sizes(), self.dtype());
  Tensor indices = alloc(self.sizes(), DType::kInt64);
  dispatch<1, 2>(Op::kSortStable, {self}, {values, indices});
  return indices;
}

}  // namespace census::ops
