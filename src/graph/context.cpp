#include "graph/context.h"

#include <cassert>

namespace census {
namespace internal {
constinit thread_local GraphContext* g_graph_context = nullptr;
}  // namespace internal
using internal::g_graph_context;

GraphScope::GraphScope(SavedTensorHooks* base_hooks) : context_(base_hooks), previous_(g_graph_context) {
  g_graph_context = &context_;
}

GraphScope::~GraphScope() {
  assert(g_graph_context == &context_);
  g_graph_context = previous_;
}

}  // namespace census
