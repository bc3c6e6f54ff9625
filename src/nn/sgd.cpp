#include "nn/sgd.h"

#include "ops/ops.h"

namespace census::nn {

namespace {

constexpr double kLr = 1e-3, kMomentum = 0.9;
constexpr size_t kMomentumBuffer = 0;

}  // namespace

void SGD::make_state(size_t i) {
  // grad.detach().clone() (for-loop, foreach) or empty_like(grad) (fused): the gradient's shape, dtype
  // and layout, which are its parameter's.
  add_state(i, impl_ == OptimizerImpl::kFused ? ops::empty_like(params_[i]) : ops::zeros_like(params_[i]));
}

void SGD::momentum_update(size_t i) {
  const Tensor g = grad(i);
  if (!made(i)) {
    add_state(i, ops::clone(g.detach()));
    return;
  }
  ops::add_(ops::mul_(state(i, kMomentumBuffer), kMomentum), g);
}

void SGD::step() {
  NoGradGuard no_grad;
  switch (impl_) {
    case OptimizerImpl::kForLoop:
      for (size_t i = 0; i < params_.size(); ++i) {
        if (!has_grad(i)) continue;
        momentum_update(i);
        ops::add_(params_[i], state(i, kMomentumBuffer));  // alpha=-lr
      }
      break;
    case OptimizerImpl::kForEach:
      for (const std::vector<size_t>& group : groups_with_grad()) {
        bool all_made = true;
        for (size_t i : group) all_made = all_made && made(i);
        std::vector<Tensor> params, grads, bufs;
        for (size_t i : group) {
          params.push_back(params_[i]);
          grads.push_back(grad(i));
        }
        if (all_made) {
          for (size_t i : group) bufs.push_back(state(i, kMomentumBuffer));
          ops::foreach_mul_(bufs, kMomentum);
          ops::foreach_add_(bufs, grads);
        } else {
          for (size_t i : group) {
            momentum_update(i);
            bufs.push_back(state(i, kMomentumBuffer));
          }
        }
        ops::foreach_add_(params, bufs);  // alpha=-lr
      }
      break;
    case OptimizerImpl::kFused: {
      // is_first_step: every buffer missing; each made as torch.empty_like(g), in order, before any update.
      for (size_t i = 0; i < params_.size(); ++i)
        if (has_grad(i) && !made(i)) add_state(i, ops::empty_like(grad(i)));
      for (const std::vector<size_t>& group : groups_with_grad()) {
        std::vector<Tensor> params, grads, bufs;
        for (size_t i : group) {
          params.push_back(params_[i]);
          grads.push_back(grad(i));
          bufs.push_back(state(i, kMomentumBuffer));
        }
        ops::fused_sgd_(params, grads, bufs);
      }
      break;
    }
  }
}

}  // namespace census::nn
