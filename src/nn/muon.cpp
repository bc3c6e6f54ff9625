#include "nn/muon.h"

#include <optional>

#include "ops/ops.h"

namespace census::nn {

namespace {

constexpr int kNewtonSchulzSteps = 5;  // names of their own: the unity build joins this file with the other optimizers'
constexpr double kMuonEps = 1e-7, kMuonMomentum = 0.95, kMuonLr = 1e-3, kMuonWeightDecay = 0.1;
constexpr size_t kMuonMomentumBuffer = 0;

// _zeropower_via_newtonschulz(update): the orthogonalized update, of the update's shape, in bf16.
Tensor zeropower_via_newtonschulz(const Tensor& update) {
  Tensor x = ops::to(update, DType::kBFloat16);
  const bool tall = update.size(0) > update.size(1);
  if (tall) x = ops::permute(x, {1, 0});
  {
    Tensor norm = ops::linalg_vector_norm(x);
    norm = ops::clamp(norm, kMuonEps, std::nullopt);
    ops::div_(x, norm);
  }
  Tensor gram, gram_update;
  for (int s = 0; s < kNewtonSchulzSteps; ++s) {
    gram = ops::mm(x, ops::permute(x, {1, 0}));
    gram_update = ops::addmm(gram, gram, gram);  // beta=b, alpha=c
    x = ops::addmm(x, gram_update, x);           // beta=a
  }
  if (tall) x = ops::permute(x, {1, 0});
  return x;
}

}  // namespace

Muon::Muon(std::vector<Tensor> matrices, std::vector<Tensor> others, Hooks hooks)
    : Optimizer(std::move(matrices), hooks),
      adamw_(std::make_unique<AdamW>(std::move(others), OptimizerImpl::kForEach, std::move(hooks))) {}

bool Muon::steps(const Tensor& param) {
  const std::string& name = param.name();
  return param.dim() == 2 && !name.starts_with("model.embed_tokens") && !name.starts_with("lm_head");
}

void Muon::make_state(size_t i) { add_state(i, ops::zeros_like(params_[i])); }

void Muon::step() {
  {
    NoGradGuard no_grad;
    for (size_t i = 0; i < params_.size(); ++i)
      if (has_grad(i) && !made(i)) make_state(i);
    Tensor update;  // the previous parameter's, until the next binds its own
    for (size_t i = 0; i < params_.size(); ++i) {
      if (!has_grad(i)) continue;
      const Tensor g = grad(i);
      Tensor& buf = state(i, kMuonMomentumBuffer);
      ops::lerp_(buf, g, 1 - kMuonMomentum);
      update = ops::lerp(g, buf, kMuonMomentum);  // nesterov
      update = zeropower_via_newtonschulz(update);
      ops::mul_(params_[i], 1 - kMuonLr * kMuonWeightDecay);
      ops::add_(params_[i], update);  // alpha=-adjusted_lr
    }
  }
  adamw_->step();
}

void Muon::make_states() {
  Optimizer::make_states();
  adamw_->make_states();
}

std::vector<Tensor> Muon::drop_states_without_grad() {
  std::vector<Tensor> dropped = Optimizer::drop_states_without_grad();
  for (Tensor& t : adamw_->drop_states_without_grad()) dropped.push_back(std::move(t));
  return dropped;
}

std::vector<Tensor> Muon::drop_states() {
  std::vector<Tensor> dropped = Optimizer::drop_states();
  for (Tensor& t : adamw_->drop_states()) dropped.push_back(std::move(t));
  return dropped;
}

void Muon::zero_grad() {
  Optimizer::zero_grad();
  adamw_->zero_grad();
}

int64_t Muon::state_bytes() const { return Optimizer::state_bytes() + adamw_->state_bytes(); }

int64_t Muon::unified_memory_bytes() const { return Optimizer::unified_memory_bytes() + adamw_->unified_memory_bytes(); }

}  // namespace census::nn
