#include "graph/context.h"

#include <cassert>

namespace census {
namespace {
thread_local GraphContext* g_context = nullptr;
}  // namespace

GraphContext& GraphContext::current() {
  assert(g_context != nullptr && "no graph context: a census Session makes one");
  return *g_context;
}

GraphScope::GraphScope(SavedTensorHooks* base_hooks) : context_(base_hooks), previous_(g_context) {
  g_context = &context_;
}

GraphScope::~GraphScope() {
  assert(g_context == &context_);
  g_context = previous_;
}

}  // namespace census
