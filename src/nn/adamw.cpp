#include "nn/adamw.h"

#include <cmath>

namespace census::nn {

void AdamW::update(const Tensor& param_in, State& state, Tensor& denom) {
  constexpr double kLr = 1e-4, kBeta1 = 0.9, kBeta2 = 0.999, kEps = 1e-8, kWeightDecay = 0.01;
  Tensor param = param_in;
  const Tensor grad(param.impl()->grad);
  ops::add_(state.step, 1.0);
  ops::mul_(param, 1.0 - kLr * kWeightDecay);
  ops::lerp_(state.exp_avg, grad, 1.0 - kBeta1);
  ops::addcmul_(ops::mul_(state.exp_avg_sq, kBeta2), grad, grad, 1.0 - kBeta2);
  // step_t.item(): the bias corrections are Python floats of it (values never change a byte).
  ops::item(state.step);
  const double bias_correction1 = 1.0 - kBeta1;
  const double bias_correction2_sqrt = std::sqrt(1.0 - kBeta2);
  Tensor next;
  {
    Tensor root = ops::sqrt(state.exp_avg_sq);
    next = ops::div_number(root, bias_correction2_sqrt);
  }
  ops::add_(next, kEps);
  denom = std::move(next);  // the previous parameter's denom dies here, after the new one exists
  ops::addcdiv_(param, state.exp_avg, denom, -kLr / bias_correction1);
}

void AdamW::zero_grad() {
  for (const Tensor& p : params_) p.impl()->grad.reset();
}

int64_t AdamW::state_bytes() const {
  int64_t total = 0;
  for (const State& s : states_) total += s.step.storage()->nbytes + s.exp_avg.storage()->nbytes + s.exp_avg_sq.storage()->nbytes;
  return total;
}

std::vector<Tensor> AdamW::step_counts() const {
  std::vector<Tensor> counts;
  for (const State& s : states_) counts.push_back(s.step);
  return counts;
}

}  // namespace census::nn
