#include "graph/context.h"

#include <cassert>

namespace census {

constinit thread_local GraphContext* GraphContext::g_current = nullptr;

GraphScope::GraphScope(SavedTensorHooks* base_hooks) : context_(base_hooks), previous_(GraphContext::g_current) {
  GraphContext::g_current = &context_;
}

GraphScope::~GraphScope() {
  assert(GraphContext::g_current == &context_);
  GraphContext::g_current = previous_;
}

}  // namespace census
