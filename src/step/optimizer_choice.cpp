#include "step/optimizer_choice.h"

#include <algorithm>

#include "nn/adafactor.h"
#include "nn/adamw.h"
#include "nn/adamw8bit.h"
#include "nn/muon.h"
#include "nn/sgd.h"
#include "nn/torchao_adamw.h"

namespace census {

namespace {

struct Named {
  StepOptimizer optimizer;
  const char* name;
};
constexpr Named kNames[] = {{StepOptimizer::kAdamW, "adamw"},
                            {StepOptimizer::kSGD, "sgd"},
                            {StepOptimizer::kAdafactor, "adafactor"},
                            {StepOptimizer::kAdamW8bit, "adamw8bit"},
                            {StepOptimizer::kPagedAdamW8bit, "paged-adamw8bit"},
                            {StepOptimizer::kTorchaoAdamW8bit, "torchao-adamw8bit"},
                            {StepOptimizer::kTorchaoAdamW4bit, "torchao-adamw4bit"},
                            {StepOptimizer::kMuon, "muon"},
                            {StepOptimizer::kNone, "none"}};

}  // namespace

const std::vector<std::string>& optimizer_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const Named& n : kNames) out.emplace_back(n.name);
    return out;
  }();
  return names;
}

std::string_view optimizer_name(StepOptimizer optimizer) {
  for (const Named& n : kNames)
    if (n.optimizer == optimizer) return n.name;
  return "?";
}

std::optional<StepOptimizer> optimizer_named(std::string_view name) {
  for (const Named& n : kNames)
    if (name == n.name) return n.optimizer;
  return std::nullopt;
}

std::vector<nn::OptimizerImpl> optimizer_forms(StepOptimizer optimizer) {
  using nn::OptimizerImpl;
  switch (optimizer) {
    case StepOptimizer::kAdamW:
    case StepOptimizer::kSGD: return {OptimizerImpl::kForEach, OptimizerImpl::kFused, OptimizerImpl::kForLoop};
    case StepOptimizer::kAdafactor: return {OptimizerImpl::kForLoop, OptimizerImpl::kForEach};
    case StepOptimizer::kAdamW8bit:
    case StepOptimizer::kPagedAdamW8bit:
    case StepOptimizer::kTorchaoAdamW8bit:
    case StepOptimizer::kTorchaoAdamW4bit:
    case StepOptimizer::kMuon:
    case StepOptimizer::kNone: return {};
  }
  return {};
}

nn::OptimizerImpl default_optimizer_impl(StepOptimizer optimizer) {
  const std::vector<nn::OptimizerImpl> forms = optimizer_forms(optimizer);
  return forms.empty() ? nn::OptimizerImpl::kForEach : forms.front();
}

nn::OptimizerImpl optimizer_impl_or_default(StepOptimizer optimizer, std::optional<nn::OptimizerImpl> impl,
                                            bool on_host) {
  if (impl) return *impl;
  // _default_to_fused_or_foreach: foreach only where every tensor is a CUDA one.
  const std::vector<nn::OptimizerImpl> forms = optimizer_forms(optimizer);
  if (on_host && std::find(forms.begin(), forms.end(), nn::OptimizerImpl::kForLoop) != forms.end())
    return nn::OptimizerImpl::kForLoop;
  return default_optimizer_impl(optimizer);
}

bool optimizer_states_shard_with_parameters(StepOptimizer optimizer) {
  return optimizer == StepOptimizer::kAdamW || optimizer == StepOptimizer::kSGD;
}

Status check_optimizer(StepOptimizer optimizer, std::optional<nn::OptimizerImpl> impl) {
  if (!impl || optimizer == StepOptimizer::kNone) return {};  // no step: no form to run (the command line
                                                              // refuses naming one, check_names)
  const std::vector<nn::OptimizerImpl> forms = optimizer_forms(optimizer);
  if (std::find(forms.begin(), forms.end(), *impl) != forms.end()) return {};
  const std::string flag = "--optimizer-impl " + std::string(nn::optimizer_impl_name(*impl)) + " with --optimizer " +
                           std::string(optimizer_name(optimizer));
  if (forms.empty())
    return refuse(flag, "it runs one kernel a parameter and has no forms; drop --optimizer-impl");
  std::string named;
  for (nn::OptimizerImpl form : forms) named += (named.empty() ? "" : " or ") + std::string(nn::optimizer_impl_name(form));
  return refuse(flag, "it has no such form; give " + named);
}

std::unique_ptr<nn::Optimizer> make_optimizer(StepOptimizer optimizer, std::optional<nn::OptimizerImpl> impl,
                                              std::vector<Tensor> params, nn::Optimizer::Hooks hooks) {
  const nn::OptimizerImpl form = optimizer_impl_or_default(optimizer, impl);
  switch (optimizer) {
    case StepOptimizer::kAdamW: return std::make_unique<nn::AdamW>(std::move(params), form, std::move(hooks));
    case StepOptimizer::kSGD: return std::make_unique<nn::SGD>(std::move(params), form, std::move(hooks));
    case StepOptimizer::kAdafactor: return std::make_unique<nn::Adafactor>(std::move(params), form, std::move(hooks));
    case StepOptimizer::kAdamW8bit: return std::make_unique<nn::AdamW8bit>(std::move(params), false, std::move(hooks));
    case StepOptimizer::kPagedAdamW8bit:
      return std::make_unique<nn::AdamW8bit>(std::move(params), true, std::move(hooks));
    case StepOptimizer::kTorchaoAdamW8bit:
      return std::make_unique<nn::TorchaoAdamW>(std::move(params), 8, std::move(hooks));
    case StepOptimizer::kTorchaoAdamW4bit:
      return std::make_unique<nn::TorchaoAdamW>(std::move(params), 4, std::move(hooks));
    case StepOptimizer::kMuon: {
      std::vector<Tensor> matrices, others;
      for (Tensor& p : params) (nn::Muon::steps(p) ? matrices : others).push_back(std::move(p));
      return std::make_unique<nn::Muon>(std::move(matrices), std::move(others), std::move(hooks));
    }
    case StepOptimizer::kNone: return nullptr;
  }
  return nullptr;
}

}  // namespace census
