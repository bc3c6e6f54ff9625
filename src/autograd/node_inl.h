// Template definitions for node.h.
#pragma once

#include "ops/dispatch.h"

namespace census {

template <class T, class... Args>
Ref<T> make_node(std::initializer_list<const Tensor*> inputs, Args&&... args) {
  Session& session = Session::current();
  if (!session.grad_enabled()) return nullptr;
  bool any = false;
  for (const Tensor* input : inputs) any = any || (input->defined() && input->requires_grad());
  if (!any) return nullptr;
  auto node = arena_shared<T>(session.next_sequence_nr(), std::forward<Args>(args)...);
  for (const Tensor* input : inputs) node->next_edges().push_back(input->defined() ? gradient_edge(*input) : Edge{});
  return node;
}

}  // namespace census
