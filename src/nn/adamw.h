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
// The steady state (every step after the first) begins with the states step 1 made
// (nn/optimizer.h): the update finds them and makes none.
#pragma once

#include <vector>

#include "nn/optimizer.h"

namespace census::nn {

class AdamW final : public Optimizer {
 public:
  AdamW(std::vector<Tensor> params, OptimizerImpl impl, Hooks hooks)
      : Optimizer(std::move(params), std::move(hooks)), impl_(impl) {}

  void step() override;

 private:
  // Each parameter's states, in the order _init_group makes them.
  enum Slot : size_t { kStep, kExpAvg, kExpAvgSq };
  void make_state(size_t i) override;
  void single_tensor_update(size_t i, Tensor& denom);
  // A group's lists, as _init_group hands them to the update: each parameter, its gradient, its states.
  struct Lists {
    std::vector<Tensor> params, grads, exp_avgs, exp_avg_sqs, steps;
  };
  Lists lists(const std::vector<size_t>& group);
  void multi_tensor_update(const std::vector<size_t>& group, std::vector<Tensor>& exp_avg_sq_sqrt);
  void fused_update(const std::vector<size_t>& group);

  OptimizerImpl impl_;
};

}  // namespace census::nn
