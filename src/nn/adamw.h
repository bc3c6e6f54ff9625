// File: adamw.h
// torch.optim.AdamW(params, lr=1e-4, weight_decay=0.01) as torch/optim/adam.py (torch 2.14) runs its
// step() and zero_grad(set_to_none=True), in each of its three forms:
//
//   foreach   _multi_tensor_adam, PyTorch's default for CUDA tensors (and DTensors)
//   fused     _fused_adam: one torch._fused_adamw_ kernel over each list
//   for-loop  _single_tensor_adam (foreach=False, fused=False)
//
//   _init_group, for each parameter with a gradient and no state yet, in order:
//     state["step"]        for-loop, foreach: torch.tensor(0.0) on the host (a CUDA run keeps it there);
//                          fused: torch.zeros((), fp32, device=p.device), on the device
//     state["exp_avg"]     zeros_like(p)
//     state["exp_avg_sq"]  zeros_like(p)
//   _single_tensor_adam, for each parameter, in place except for denom:
//     step_t += 1; p.mul_(1 - lr * wd); exp_avg.lerp_(grad, 1 - beta1)
//     exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
//     step = step_t.item()                        a scalar read
//     denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
//                                                 sqrt and the quotient both live, and the previous
//                                                 parameter's denom until the name is rebound
//     p.addcdiv_(exp_avg, denom, value=-step_size)
//   _multi_tensor_adam, for each group of the lists by (device, dtype), in order:
//     _foreach_add_(steps, torch.tensor(1.0))      a host scalar, freed with the statement
//     _foreach_mul_(params, 1 - lr * wd); _foreach_lerp_(exp_avgs, grads, 1 - beta1)
//     _foreach_mul_(exp_avg_sqs, beta2); _foreach_addcmul_(exp_avg_sqs, grads, grads, 1 - beta2)
//     two scalar reads a parameter (the bias corrections of step.item())
//     exp_avg_sq_sqrt = _foreach_sqrt(exp_avg_sqs)  a whole list of the group's moments' sizes at once:
//                                                 the previous group's list lives until the name is
//                                                 rebound, the last until step() returns
//     _foreach_div_(exp_avg_sq_sqrt, bias_correction2_sqrt); _foreach_add_(exp_avg_sq_sqrt, eps)
//     _foreach_addcdiv_(params, exp_avgs, exp_avg_sq_sqrt, step_size)
//   _fused_adam, for each group by (device, dtype):
//     _foreach_add_(steps, 1); _fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, [], steps): in place
//
// The steady state (every step after the first) begins with the states step 1 made: make_states()
// makes them before the step's forward, as they stand then; the update finds them and makes none.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "nn/module.h"
#include "ops/ops.h"

namespace census::nn {

enum class OptimizerImpl : uint8_t { kForEach, kFused, kForLoop };

// "foreach", "fused", "for-loop": --optimizer-impl's words.
std::string_view optimizer_impl_name(OptimizerImpl impl);

class AdamW {
 public:
  // What the optimizer tells its caller of the tensors it makes: each state as it is made, and each
  // tensor a CUDA run keeps on the host (the step counts of the for-loop and foreach forms, the
  // foreach form's scalar one).
  struct Hooks {
    std::function<void(const Tensor&)> on_state;
    std::function<void(const Tensor&)> on_host;
  };

  AdamW(std::vector<Tensor> params, OptimizerImpl impl, Hooks hooks)
      : params_(std::move(params)), impl_(impl), hooks_(std::move(hooks)), states_(params_.size()) {}

  // The states of every parameter, as the step before this one left them (the steady state): made as
  // _init_group makes them.
  void make_states();
  // The states of the parameters that have no gradient now: a step gives them none (_init_group skips
  // a parameter without one), so a steady step never had them. Dropped, and returned for the caller
  // to take back from its count.
  std::vector<Tensor> drop_states_without_grad();
  // step(): _init_group (the states of parameters with a gradient that have none), then the update.
  void step();
  void zero_grad();
  // Bytes of every state tensor held.
  int64_t state_bytes() const;

 private:
  struct State {
    Tensor step;
    Tensor exp_avg;
    Tensor exp_avg_sq;
    bool made() const { return exp_avg.defined(); }
  };
  void make_state(size_t i);
  void single_tensor_update(size_t i, Tensor& denom);
  // The parameters with a gradient, in order, grouped by dtype as _group_tensors_by_device_and_dtype
  // groups them (one device).
  std::vector<std::vector<size_t>> groups_with_grad() const;
  // A group's lists, as _init_group hands them to the update: each parameter, its gradient, its states.
  struct Lists {
    std::vector<Tensor> params, grads, exp_avgs, exp_avg_sqs, steps;
  };
  Lists lists(const std::vector<size_t>& group) const;
  void multi_tensor_update(const std::vector<size_t>& group, std::vector<Tensor>& exp_avg_sq_sqrt);
  void fused_update(const std::vector<size_t>& group);

  std::vector<Tensor> params_;
  OptimizerImpl impl_;
  Hooks hooks_;
  std::vector<State> states_;  // by parameter
};

}  // namespace census::nn
