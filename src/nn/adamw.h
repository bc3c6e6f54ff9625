// File: adamw.h
// torch.optim.AdamW(params, foreach=False, fused=False): its first step() (the states created) and
// zero_grad(set_to_none=True), as Adam's _init_group and _single_tensor_adam run them.
//
//   _init_group, for each parameter with a gradient, in order:
//     state["step"] = torch.tensor(0.0)           () fp32, 4 B
//     state["exp_avg"] = zeros_like(p)            p's size and dtype
//     state["exp_avg_sq"] = zeros_like(p)
//   _single_tensor_adam, for each parameter, in place except for denom:
//     step_t += 1; p.mul_(1 - lr * wd); exp_avg.lerp_(grad, 1 - beta1)
//     exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
//     step = step_t.item()                        a scalar read
//     denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
//                                                 sqrt and the quotient both live, and the previous
//                                                 parameter's denom until the name is rebound
//     p.addcdiv_(exp_avg, denom, value=-step_size)
//   the last denom dies when step() returns.
#pragma once

#include <vector>

#include "nn/module.h"
#include "ops/ops.h"

namespace census::nn {

class AdamW {
 public:
  explicit AdamW(std::vector<Tensor> params) : params_(std::move(params)) {}
  // The first step; `on_state` sees each state tensor as it is made.
  template <class OnState>
  void step(OnState&& on_state);
  void zero_grad();
  // Bytes of every state tensor made so far.
  int64_t state_bytes() const;
  // Each state["step"]: torch.tensor(0.0), made without a device where neither capturable nor fused,
  // so a host tensor in a CUDA run.
  std::vector<Tensor> step_counts() const;

 private:
  struct State {
    Tensor step;
    Tensor exp_avg;
    Tensor exp_avg_sq;
  };
  void update(const Tensor& param, State& state, Tensor& denom);

  std::vector<Tensor> params_;
  std::vector<State> states_;  // by parameter with a gradient, in order
};


template <class OnState>
void AdamW::step(OnState&& on_state) {
  NoGradGuard no_grad;  // step() runs under torch.no_grad
  std::vector<Tensor> with_grad;
  for (const Tensor& p : params_) {
    if (!p.impl()->grad) continue;
    with_grad.push_back(p);
    State state{ops::scalar_tensor_fresh(), ops::zeros_like(p), ops::zeros_like(p)};
    on_state(state.step);
    on_state(state.exp_avg);
    on_state(state.exp_avg_sq);
    states_.push_back(std::move(state));
  }
  Tensor denom;
  for (size_t i = 0; i < with_grad.size(); ++i) update(with_grad[i], states_[i], denom);
}

}  // namespace census::nn
