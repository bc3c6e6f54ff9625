#include "graph/node.h"

#include "graph/accumulate_grad.h"

namespace census {

Edge gradient_edge(const Tensor& tensor) {
  TensorImpl* impl = tensor.impl();
  if (impl->grad_fn) return Edge{impl->grad_fn, impl->output_nr, impl->sizes, impl->dtype};
  if (!impl->requires_grad) return Edge{};
  Ref<Node> accumulator = impl->grad_accumulator.lock();
  if (!accumulator) {
    accumulator = arena_shared<AccumulateGrad>(tensor.impl_ptr());
    impl->grad_accumulator = accumulator;
  }
  return Edge{accumulator, 0, impl->sizes, impl->dtype};
}

void set_history(const Tensor& out, const Ref<Node>& node, uint32_t output_nr) {
  if (!node) return;
  out.impl()->grad_fn = node;
  out.impl()->output_nr = output_nr;
}

}  // namespace census
