// File: optimizer.h
// What every torch.optim-style optimizer Census runs shares (nn/adamw.h, nn/sgd.h, nn/adafactor.h,
// nn/adamw8bit.h): its parameters, each one's states as it made them, the hooks that tell the step
// census of each tensor it makes, and zero_grad(set_to_none=True).
//
// An optimizer makes a parameter's states lazily, in the first step() that finds it with a gradient
// (torch.optim's _init_group; bitsandbytes' init_state). The steady state (every step after the first)
// begins with them: make_states() makes them before the step's forward, as they stand then. An
// optimizer that steps some of its parameters with another (Muon, beside AdamW) extends what holds
// states (the virtual members below) to that one too.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "nn/module.h"

namespace census::nn {

// torch.optim's forms: foreach (_multi_tensor_*), fused (_fused_*), for-loop (_single_tensor_*).
enum class OptimizerImpl : uint8_t { kForEach, kFused, kForLoop };

// "foreach", "fused", "for-loop": --optimizer-impl's words.
std::string_view optimizer_impl_name(OptimizerImpl impl);

class Optimizer {
 public:
  // What the optimizer tells its caller of the tensors it makes: each state as it is made, each
  // tensor a CUDA run keeps on the host (torch.optim's step counts, the foreach forms' scalar one), and
  // each state made outside PyTorch's allocators (PagedAdamW8bit's unified memory).
  struct Hooks {
    std::function<void(const Tensor&)> on_state;
    std::function<void(const Tensor&)> on_host;
    std::function<void(const Tensor&)> on_unified;
  };

  Optimizer(std::vector<Tensor> params, Hooks hooks)
      : params_(std::move(params)), hooks_(std::move(hooks)), states_(params_.size()) {}
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // The states of every parameter, as the step before this one left them (the steady state).
  virtual void make_states();
  // The states of the parameters that have no gradient now: a step gives them none, so a steady step
  // never had them. Dropped, and returned for the caller to take back from its count.
  virtual std::vector<Tensor> drop_states_without_grad();
  // Every state, dropped and returned (an optimizer in the backward whose parameter no gradient reached:
  // its step never ran, so it never had them).
  virtual std::vector<Tensor> drop_states();
  // step(): the states of parameters with a gradient that have none, then the update.
  virtual void step() = 0;
  virtual void zero_grad();
  // Bytes of every state tensor held, each storage once (a state several parameters share counts once).
  virtual int64_t state_bytes() const;
  // Of those, the bytes outside PyTorch's caching allocator (PagedAdamW8bit's unified memory), which
  // the hooks were never told of.
  virtual int64_t unified_memory_bytes() const;

 protected:
  // Make parameter i's states, in its optimizer's order, each through add_state.
  virtual void make_state(size_t i) = 0;
  bool made(size_t i) const { return !states_[i].empty(); }
  bool has_grad(size_t i) const { return params_[i].impl()->grad != nullptr; }
  Tensor grad(size_t i) const { return Tensor(params_[i].impl()->grad); }
  // Parameter i's state `slot`, in the order make_state added them.
  Tensor& state(size_t i, size_t slot) { return states_[i][slot]; }
  void add_state(size_t i, Tensor t);
  // A state made outside the caching allocator (cudaMallocManaged): held and counted in state_bytes and
  // unified_memory_bytes, and told through Hooks::on_unified, not on_state: the device's memory never
  // holds it.
  void add_unified_state(size_t i, Tensor t);
  // A state every parameter shares (bitsandbytes' quantile maps), counted once; those made, in order.
  void add_shared_state(Tensor t);
  const std::vector<Tensor>& shared_states() const { return shared_states_; }
  void on_host(const Tensor& t) const { hooks_.on_host(t); }
  // The parameters with a gradient, in order, grouped by dtype as _group_tensors_by_device_and_dtype
  // groups them (one device).
  std::vector<std::vector<size_t>> groups_with_grad() const;

  std::vector<Tensor> params_;

 private:
  Hooks hooks_;
  std::vector<std::vector<Tensor>> states_;  // by parameter
  std::vector<Tensor> shared_states_;
  std::vector<const void*> unified_storages_;
};

}  // namespace census::nn
