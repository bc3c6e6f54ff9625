// File: optimizer_choice.h
// The optimizer a run steps with, as `census step --optimizer` and `--optimizer-impl` name it, each as
// the implementation it names runs it:
//   adamw             torch.optim.AdamW (nn/adamw.h): foreach (PyTorch's default on CUDA), fused, for-loop
//   sgd               torch.optim.SGD with momentum 0.9 (nn/sgd.h): foreach (the default), fused, for-loop
//   adafactor         torch.optim.Adafactor (nn/adafactor.h): for-loop (its default: it never picks foreach
//                     itself), foreach
//   adamw8bit         bitsandbytes' AdamW8bit (nn/adamw8bit.h): one kernel, no forms
//   paged-adamw8bit   bitsandbytes' PagedAdamW8bit: the same, its large states in unified memory
//   torchao-adamw8bit, torchao-adamw4bit   torchao's AdamW8bit and AdamW4bit (nn/torchao_adamw.h): their
//                     compiled update stood in for by a kernel that allocates nothing; no forms
//   muon              torch.optim.Muon over the 2-D weights, torch.optim.AdamW (foreach) over the rest
//                     (nn/muon.h); no forms
//   none              no optimizer step
// Every other combination is refused by name (check_optimizer).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nn/optimizer.h"
#include "util/result.h"

namespace census {

enum class StepOptimizer : uint8_t {
  kNone, kAdamW, kSGD, kAdafactor, kAdamW8bit, kPagedAdamW8bit, kTorchaoAdamW8bit, kTorchaoAdamW4bit, kMuon,
};

// --optimizer's words, in the order the help lists them.
const std::vector<std::string>& optimizer_names();
std::string_view optimizer_name(StepOptimizer optimizer);
std::optional<StepOptimizer> optimizer_named(std::string_view name);
// The forms the optimizer has (empty: one implementation, no --optimizer-impl), and the one it runs
// where none is named: PyTorch's own default on CUDA.
std::vector<nn::OptimizerImpl> optimizer_forms(StepOptimizer optimizer);
nn::OptimizerImpl default_optimizer_impl(StepOptimizer optimizer);
// The form a step runs: `impl` where given, else the optimizer's default: on CUDA tensors PyTorch's, on
// host tensors (`on_host`: FSDP2's CPU offloading) the for-loop where the optimizer has one.
nn::OptimizerImpl optimizer_impl_or_default(StepOptimizer optimizer, std::optional<nn::OptimizerImpl> impl,
                                            bool on_host = false);
// Whether the optimizer keeps one state of its parameter's shape and dtype for each that ZeRO and
// FSDP2 shard along with it (AdamW, SGD), rather than states laid out by rows and columns or by blocks.
bool optimizer_states_shard_with_parameters(StepOptimizer optimizer);

// A form the optimizer does not have: refused, naming both (a form given with no optimizer is unused).
Status check_optimizer(StepOptimizer optimizer, std::optional<nn::OptimizerImpl> impl);

// The optimizer over `params` (kNone: null).
std::unique_ptr<nn::Optimizer> make_optimizer(StepOptimizer optimizer, std::optional<nn::OptimizerImpl> impl,
                                              std::vector<Tensor> params, nn::Optimizer::Hooks hooks);

}  // namespace census
