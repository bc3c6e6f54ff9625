#include "nn/optimizer.h"

#include <algorithm>
#include <unordered_set>

namespace census::nn {

std::string_view optimizer_impl_name(OptimizerImpl impl) {
  switch (impl) {
    case OptimizerImpl::kForEach: return "foreach";
    case OptimizerImpl::kFused: return "fused";
    case OptimizerImpl::kForLoop: return "for-loop";
  }
  return "?";
}

void Optimizer::make_states() {
  NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i)
    if (!made(i)) make_state(i);
}

std::vector<Tensor> Optimizer::drop_states_without_grad() {
  std::vector<Tensor> dropped;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!made(i) || has_grad(i)) continue;
    for (Tensor& t : states_[i]) dropped.push_back(std::move(t));
    states_[i].clear();
  }
  return dropped;
}

std::vector<Tensor> Optimizer::drop_states() {
  std::vector<Tensor> dropped;
  for (std::vector<Tensor>& states : states_) {
    for (Tensor& t : states) dropped.push_back(std::move(t));
    states.clear();
  }
  for (Tensor& t : shared_states_) dropped.push_back(std::move(t));
  shared_states_.clear();
  return dropped;
}

void Optimizer::zero_grad() {
  for (const Tensor& p : params_) p.impl()->grad.reset();
}

int64_t Optimizer::state_bytes() const {
  std::unordered_set<const void*> seen;
  int64_t total = 0;
  auto count = [&](const Tensor& t) {
    if (seen.insert(t.storage().get()).second) total += t.storage()->nbytes;
  };
  for (const std::vector<Tensor>& states : states_)
    for (const Tensor& t : states) count(t);
  for (const Tensor& t : shared_states_) count(t);
  return total;
}

void Optimizer::add_state(size_t i, Tensor t) {
  hooks_.on_state(t);
  states_[i].push_back(std::move(t));
}

void Optimizer::add_unified_state(size_t i, Tensor t) {
  hooks_.on_unified(t);
  unified_storages_.push_back(t.storage().get());
  states_[i].push_back(std::move(t));
}

int64_t Optimizer::unified_memory_bytes() const {
  int64_t total = 0;
  for (const std::vector<Tensor>& states : states_)
    for (const Tensor& t : states)
      if (std::find(unified_storages_.begin(), unified_storages_.end(), t.storage().get()) != unified_storages_.end())
        total += t.storage()->nbytes;
  return total;
}

void Optimizer::add_shared_state(Tensor t) {
  hooks_.on_state(t);
  shared_states_.push_back(std::move(t));
}

std::vector<std::vector<size_t>> Optimizer::groups_with_grad() const {
  std::vector<std::vector<size_t>> groups;
  std::vector<DType> dtypes;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!has_grad(i)) continue;
    size_t g = 0;
    while (g < dtypes.size() && dtypes[g] != params_[i].dtype()) ++g;
    if (g == dtypes.size()) {
      dtypes.push_back(params_[i].dtype());
      groups.emplace_back();
    }
    groups[g].push_back(i);
  }
  return groups;
}

}  // namespace census::nn
