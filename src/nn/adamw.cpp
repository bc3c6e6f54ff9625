#include "nn/adamw.h"

#include <cmath>

#include "ops/ops.h"

namespace census::nn {

namespace {

constexpr double kLr = 1e-4, kBeta1 = 0.9, kBeta2 = 0.999, kEps = 1e-8, kWeightDecay = 0.01;

}  // namespace

void AdamW::make_state(size_t i) {
  const Tensor& p = params_[i];
  if (impl_ == OptimizerImpl::kFused) {
    add_state(i, ops::zeros(Dims{}, DType::kFloat32));  // on the parameter's device
  } else {
    Tensor step = ops::scalar_tensor_fresh();
    add_state(i, step);
    on_host(step);
  }
  add_state(i, ops::zeros_like(p));  // exp_avg
  add_state(i, ops::zeros_like(p));  // exp_avg_sq
}

void AdamW::single_tensor_update(size_t i, Tensor& denom) {
  Tensor param = params_[i];
  const Tensor g = grad(i);
  Tensor& step = state(i, kStep);
  Tensor& exp_avg = state(i, kExpAvg);
  Tensor& exp_avg_sq = state(i, kExpAvgSq);
  ops::add_(step, 1.0);
  ops::mul_(param, 1.0 - kLr * kWeightDecay);
  ops::lerp_(exp_avg, g, 1.0 - kBeta1);
  ops::addcmul_(ops::mul_(exp_avg_sq, kBeta2), g, g, 1.0 - kBeta2);
  // step_t.item(): the bias corrections are Python floats of it (values never change a byte).
  ops::item(step);
  const double bias_correction1 = 1.0 - kBeta1;
  const double bias_correction2_sqrt = std::sqrt(1.0 - kBeta2);
  Tensor next;
  {
    Tensor root = ops::sqrt(exp_avg_sq);
    next = ops::div_number(root, bias_correction2_sqrt);
  }
  ops::add_(next, kEps);
  denom = std::move(next);  // the previous parameter's denom dies here, after the new one exists
  ops::addcdiv_(param, exp_avg, denom, -kLr / bias_correction1);
}

AdamW::Lists AdamW::lists(const std::vector<size_t>& group) {
  Lists l;
  for (size_t i : group) {
    l.params.push_back(params_[i]);
    l.grads.push_back(grad(i));
    l.exp_avgs.push_back(state(i, kExpAvg));
    l.exp_avg_sqs.push_back(state(i, kExpAvgSq));
    l.steps.push_back(state(i, kStep));
  }
  return l;
}

void AdamW::multi_tensor_update(const std::vector<size_t>& group, std::vector<Tensor>& exp_avg_sq_sqrt) {
  auto [params, grads, exp_avgs, exp_avg_sqs, steps] = lists(group);
  {
    // The steps are on the host: torch.tensor(1.0, device="cpu") once for the list.
    const Tensor one = ops::scalar_tensor_fresh();
    on_host(one);
    ops::foreach_add_(steps, one);
  }
  ops::foreach_mul_(params, 1.0 - kLr * kWeightDecay);
  ops::foreach_lerp_(exp_avgs, grads, 1.0 - kBeta1);
  ops::foreach_mul_(exp_avg_sqs, kBeta2);
  ops::foreach_addcmul_(exp_avg_sqs, grads, grads, 1.0 - kBeta2);
  // bias_correction1 and bias_correction2: 1 - beta ** _get_value(step), a read of each step.
  for (int corrections = 0; corrections < 2; ++corrections)
    for (const Tensor& step : steps) ops::item(step);
  std::vector<double> bias_correction2_sqrt(group.size(), std::sqrt(1.0 - kBeta2));
  std::vector<double> step_size(group.size(), -kLr / (1.0 - kBeta1));
  std::vector<Tensor> roots = ops::foreach_sqrt(exp_avg_sqs);
  exp_avg_sq_sqrt = std::move(roots);  // the previous group's list dies here, after this one exists
  ops::foreach_div_(exp_avg_sq_sqrt, bias_correction2_sqrt);
  ops::foreach_add_(exp_avg_sq_sqrt, kEps);
  ops::foreach_addcdiv_(params, exp_avgs, exp_avg_sq_sqrt, step_size);
}

void AdamW::fused_update(const std::vector<size_t>& group) {
  auto [params, grads, exp_avgs, exp_avg_sqs, steps] = lists(group);
  ops::foreach_add_(steps, 1.0);
  ops::fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, steps);
}

void AdamW::step() {
  NoGradGuard no_grad;  // step() runs under torch.no_grad
  for (size_t i = 0; i < params_.size(); ++i)
    if (has_grad(i) && !made(i)) make_state(i);
  switch (impl_) {
    case OptimizerImpl::kForLoop: {
      Tensor denom;
      for (size_t i = 0; i < params_.size(); ++i)
        if (has_grad(i)) single_tensor_update(i, denom);
      break;
    }
    case OptimizerImpl::kForEach: {
      std::vector<Tensor> exp_avg_sq_sqrt;
      for (const std::vector<size_t>& group : groups_with_grad()) multi_tensor_update(group, exp_avg_sq_sqrt);
      break;
    }
    case OptimizerImpl::kFused:
      for (const std::vector<size_t>& group : groups_with_grad()) fused_update(group);
      break;
  }
}

}  // namespace census::nn
