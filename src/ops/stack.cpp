// stack: ERNIE-4.5's rotate_half (torch.stack((-x2, x1), dim=-1).flatten(-2)). Above its node, the
// derivatives.yaml entry it follows.
#include <cassert>

#include "ops/internal.h"
#include "ops/ops.h"

namespace census::ops {
using internal::alloc;

namespace {

// stack(Tensor[] tensors, int dim=0)  tensors: stack_tensors_backward(grad, dim, to_args_scalartypes(tensors))
// Each input's gradient is one slice of the incoming gradient along dim (unbind): views, no allocation.
class StackBackward0 final : public Node {
 public:
  StackBackward0(uint64_t seq, int dim) : Node("StackBackward0", seq), dim_(dim) {}
  GradList apply(GradList& grads) override {
    std::vector<Tensor> parts = unbind(grads[0], dim_);
    GradList out(parts.size());
    for (size_t i = 0; i < parts.size(); ++i)
      if (should_compute_output(i)) out[i] = parts[i];
    return out;
  }

 private:
  int dim_;
};

}  // namespace

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  assert(tensors.size() == 2 && "stack of two tensors");
  const int d = wrap_dim(dim, tensors[0].dim() + 1);
  Dims sizes = tensors[0].sizes();
  sizes.insert(d, static_cast<int64_t>(tensors.size()));
  auto node = make_node<StackBackward0>({&tensors[0], &tensors[1]}, d);
  Tensor out = alloc(sizes, tensors[0].dtype());
  internal::dispatch(Op::kStack, tensors, std::span<const Tensor>(&out, 1));
  set_history(out, node);
  return out;
}

}  // namespace census::ops
