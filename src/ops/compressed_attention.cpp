// The ops DeepSeek-V4's compressed attention adds: the comparisons and selections of its causal block
// masks and its indexer's top-k bookkeeping, and the -inf-filled gate of its overlapping windows.
// Above each node, the derivatives.yaml entry it follows.
#include "ops/internal.h"
#include "ops/ops.h"

namespace census::ops {
using internal::alloc;
using internal::dispatch;

namespace {

// where.self(Tensor condition, Tensor self, Tensor other)
//   self: where(condition, grad, 0)    other: where(condition, 0, grad)   -> saves condition
class WhereBackward0 final : public Node {
 public:
  explicit WhereBackward0(uint64_t seq) : Node("WhereBackward0", seq) {}
  GradList apply(GradList& grads) override {
    const Tensor condition = condition_.unpack();
    GradList out(2);
    for (size_t i = 0; i < 2; ++i) {
      if (!should_compute_output(i)) continue;
      out[i] = alloc(grads[0].sizes(), grads[0].dtype());
      dispatch<2, 1>(Op::kWhere, {condition, grads[0]}, {out[i]});
    }
    return out;
  }
  SavedVariable condition_{this};
};

}  // namespace

Tensor ge(const Tensor& self, const Tensor& other) {
  Tensor out = alloc(internal::broadcast_sizes(self.sizes(), other.sizes()), DType::kBool);
  dispatch<2, 1>(Op::kGeTensor, {self, other}, {out});
  return out;
}

Tensor new_full(const Tensor& self, const Dims& sizes, double /*value*/) {
  Tensor out = alloc(sizes, self.dtype());
  dispatch<1, 1>(Op::kNewFull, {self}, {out});
  return out;
}

Tensor where(const Tensor& condition, const Tensor& self, const Tensor& other) {
  auto node = make_node<WhereBackward0>({&self, &other});
  if (node) node->condition_.save(condition);
  const Dims sizes =
      internal::broadcast_sizes(internal::broadcast_sizes(condition.sizes(), self.sizes()), other.sizes());
  Tensor out = alloc(sizes, promote(self.dtype(), other.dtype()));
  dispatch<3, 1>(Op::kWhere, {condition, self, other}, {out});
  set_history(out, node);
  return out;
}

}  // namespace census::ops
