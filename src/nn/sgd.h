// File: sgd.h
// torch.optim.SGD(params, lr=1e-3, momentum=0.9) (no dampening, weight decay or Nesterov) as
// torch/optim/sgd.py (torch 2.14) runs its step() and zero_grad(set_to_none=True), in each of its forms:
//
//   foreach   _multi_tensor_sgd, PyTorch's default for CUDA tensors
//   fused     _fused_sgd: one torch._fused_sgd_ kernel over each list
//   for-loop  _single_tensor_sgd (foreach=False, fused=False)
//
// Its one state, state["momentum_buffer"], is made inside the update, not by _init_group:
//   for-loop  for each parameter: the first step's buf = grad.detach().clone(), later
//             buf.mul_(momentum).add_(grad); then param.add_(buf, alpha=-lr)
//   foreach   for each group by (device, dtype): where every buffer exists, _foreach_mul_(bufs, momentum)
//             and _foreach_add_(bufs, grads); else the for-loop's per parameter; then
//             _foreach_add_(params, bufs, alpha=-lr)
//   fused     the first step's torch.empty_like(g) for every gradient before any update; for each group,
//             _fused_sgd_(params, grads, bufs), in place
// No form allocates in a later step: SGD with momentum holds one buffer a parameter, nothing more.
#pragma once

#include <vector>

#include "nn/optimizer.h"

namespace census::nn {

class SGD final : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, OptimizerImpl impl, Hooks hooks)
      : Optimizer(std::move(params), std::move(hooks)), impl_(impl) {}

  void step() override;

 private:
  void make_state(size_t i) override;  // the momentum buffer, as the first step's clone of the gradient
  // The first step's buf = grad.detach().clone(); later buf.mul_(momentum).add_(grad).
  void momentum_update(size_t i);

  OptimizerImpl impl_;
};

}  // namespace census::nn
