#include "graph/node.h"

#include "graph/accumulate_grad.h"

namespace census {

void ref_retain(Node* node) { node->retain_ref(); }
void ref_release(Node* node) {
  if (!node->release_ref()) return;
  const uint32_t tag = node->arena_tag();
  void* memory = arena_memory_of(node);
  node->~Node();  // virtual: the whole node
  if (tag != 0) give_back_to_arena(memory, tag);
}
long ref_count(const Node* node) { return static_cast<long>(node->ref_count()); }

Edge gradient_edge(const Tensor& tensor) {
  TensorImpl* impl = tensor.impl();
  if (impl->grad_fn) return Edge{impl->grad_fn, impl->output_nr, impl->sizes, impl->dtype};
  if (!impl->requires_grad) return Edge{};
  if (impl->grad_accumulator == nullptr) {
    Ref<Node> accumulator = arena_shared<AccumulateGrad>(tensor.impl_ptr());
    impl->grad_accumulator = accumulator.get();
    return Edge{std::move(accumulator), 0, impl->sizes, impl->dtype};
  }
  return Edge{Ref<Node>(impl->grad_accumulator), 0, impl->sizes, impl->dtype};
}

void set_history(const Tensor& out, const Ref<Node>& node, uint32_t output_nr) {
  if (!node) return;
  out.impl()->grad_fn = node;
  out.impl()->output_nr = output_nr;
}

}  // namespace census
