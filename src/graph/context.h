// File: context.h
// The graph's context for the thread: grad mode, the next sequence number a node takes, and the
// saved-tensor hooks that see each tensor a node saves (torch.autograd.graph.saved_tensors_hooks).
// A GraphScope gives a census its own: sequence numbers restart at 0 and grad mode is on, so a
// census builds the same graph whatever ran before.
#pragma once

#include <cassert>
#include <cstdint>

namespace census {

class SavedTensorHooks;

class GraphContext {
 public:
  static GraphContext& current() {
    assert(g_current != nullptr && "no graph context: a census Session makes one");
    return *g_current;
  }

  bool grad_enabled() const { return grad_enabled_; }
  void set_grad_enabled(bool enabled) { grad_enabled_ = enabled; }
  uint64_t next_sequence_nr() { return next_sequence_nr_++; }

  // The innermost hooks; a scope's base hooks when no other is installed.
  SavedTensorHooks& hooks() const { return *hooks_; }
  SavedTensorHooks* set_hooks(SavedTensorHooks* hooks) {
    SavedTensorHooks* previous = hooks_;
    hooks_ = hooks;
    return previous;
  }

 private:
  friend class GraphScope;
  explicit GraphContext(SavedTensorHooks* hooks) : hooks_(hooks) {}

  // The thread's context (a GraphScope's), here so that current() inlines: every op asks.
  static constinit thread_local GraphContext* g_current;

  uint64_t next_sequence_nr_ = 0;
  bool grad_enabled_ = true;
  SavedTensorHooks* hooks_;
};

// A fresh context, current for the thread while the scope lives, with `base_hooks` installed.
class GraphScope {
 public:
  explicit GraphScope(SavedTensorHooks* base_hooks);
  ~GraphScope();
  GraphScope(const GraphScope&) = delete;
  GraphScope& operator=(const GraphScope&) = delete;

 private:
  GraphContext context_;
  GraphContext* previous_;
};

// Grad mode set for a scope: off as torch.no_grad() (and as the engine runs every backward formula),
// on as torch.enable_grad() (a checkpoint's recompute).
class GradModeGuard {
 public:
  explicit GradModeGuard(bool enabled) : context_(GraphContext::current()), was_(context_.grad_enabled()) {
    context_.set_grad_enabled(enabled);
  }
  ~GradModeGuard() { context_.set_grad_enabled(was_); }
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  GraphContext& context_;
  bool was_;
};

class NoGradGuard : public GradModeGuard {
 public:
  NoGradGuard() : GradModeGuard(false) {}
};

}  // namespace census
