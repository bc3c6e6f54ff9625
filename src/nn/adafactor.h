// File: adafactor.h
// torch.optim.Adafactor(params) (lr 1e-2, beta2_decay -0.8, eps (None, 1e-3), d 1, no weight decay) as
// torch/optim/_adafactor.py (torch 2.14) runs its step() and zero_grad(set_to_none=True), in its two
// forms; foreach=None, its default, is the for-loop (Adafactor does not pick foreach on CUDA), and it
// has no fused form.
//
//   _init_group, for each parameter with a gradient and no state yet, in order:
//     state["step"]      torch.tensor(0.0) on the host
//     a matrix (2 or more dims): state["row_var"] grad.new_zeros(shape with the last dim 1),
//                                state["col_var"] grad.new_zeros(shape with the second-last dim 1)
//     a vector:                  state["variance"] zeros_like(grad)
//   _single_tensor_adafactor, for each parameter; its names (row_mean, col_mean, var_estimate, update,
//   grad_squared) live on across the loop until rebound, the last until step() returns:
//     step_t += 1; step_t.item(); param.norm(2).item()     a 0-d norm, freed at once
//     matrix: row_mean = vector_norm(grad, dim=-1, keepdim).square_().div_(n); row_var.lerp_(row_mean)
//             col_mean likewise along dim -2; var_estimate = row_var @ col_var   the gradient's size
//             var_estimate.div_(row_var.mean(dim=-2, keepdim).clamp_(min=eps1))
//     vector: grad_squared = grad * grad; variance.lerp_(grad_squared); var_estimate = variance.clone()
//     update = var_estimate.clamp_(min=eps1^2).rsqrt_(); update.mul_(grad)
//     update.norm(2).item(); param.add_(update)
//   _multi_tensor_adafactor, for each group by (device, dtype, matrix or vector), in order of their first
//   parameters: the same on lists (_foreach_*): the group's row and column means as lists (deleted after
//   their lerp), its var_estimates as a list of the gradients' sizes at once, which live on as `updates`
//   until the next group's are made.
#pragma once

#include <vector>

#include "nn/optimizer.h"

namespace census::nn {

class Adafactor final : public Optimizer {
 public:
  Adafactor(std::vector<Tensor> params, OptimizerImpl impl, Hooks hooks)
      : Optimizer(std::move(params), std::move(hooks)), impl_(impl) {}

  void step() override;

 private:
  // Each parameter's states, in the order _init_group makes them: the step, then the row and column
  // variances of a matrix, or a vector's variance.
  enum Slot : size_t { kStep, kRowVar, kColVar, kVariance = kRowVar };
  void make_state(size_t i) override;
  bool factored(size_t i) const { return params_[i].dim() > 1; }
  void single_tensor_update();
  void multi_tensor_update();

  OptimizerImpl impl_;
};

}  // namespace census::nn
