#include "step/autocast_choice.h"

#include <string>

#include "models/registry.h"

namespace census {

Status check_autocast(const ModelConfig& config, const StepOptions& o) {
  if (!o.autocast) {
    if (o.load_dtype == DType::kFloat32)
      return refuse("--load-dtype fp32 without --autocast",
                    "a model trained in fp32 throughout is not priced yet; add --autocast bf16 (the HF Trainer's "
                    "bf16=True), or drop the option");
    return {};
  }
  if (!config.family->autocast) {
    std::string checked;
    for (const Family* family : families())
      if (family->autocast) checked += (checked.empty() ? "" : ", ") + std::string(family->model_type);
    return refuse("--autocast on " + config.model_type,
                  "the HF Trainer's autocast is checked against the oracle on " + checked +
                      "; it is not priced on this model type yet");
  }
  // Transformers' grouped_mm experts refuse fp32 weights ("Expected mat_a to be BFloat16"), on CUDA as on
  // the oracle's fakes; its eager experts are not checked under autocast.
  for (int64_t i = 0; i < config.num_hidden_layers && o.fp32_weights(); ++i)
    if (is_moe_layer(config, i))
      return refuse("--autocast on " + config.model_type + "'s experts (layer " + std::to_string(i) + ")",
                    "Transformers' grouped_mm experts refuse fp32 weights, and its eager experts are not priced under "
                    "autocast yet; give --load-dtype bf16, as Transformers 5 loads a bf16 checkpoint");
  const char* with = layout_flag(o);
  if (with != nullptr)
    return refuse(std::string("--autocast with ") + with,
                  "autocast is priced on one rank's whole model yet (no --tp, --pp, --cp, --ep, --dp, --zero or "
                  "--fsdp)");
  if (o.fp32_weights() && o.lora && o.lora->dtype != DType::kFloat32)
    return refuse("--lora-dtype bf16 with --autocast", "on a base loaded in fp32 PEFT makes the adapters fp32; give "
                                                       "--lora-dtype fp32, or --load-dtype bf16");
  with = o.quantize                                                    ? "--quantize"
         : o.lora && o.lora->use_dora                                  ? "--use-dora"
         : o.fp8                                                       ? "--fp8"
         : o.offload_activations == OffloadPolicy::kTorchtune          ? "--offload-activations torchtune"
         : o.composition.fp32_master_weights                           ? "--master-weights fp32"
         : o.composition.fp32_gradients                                ? "--grad-dtype fp32"
                                                                       : nullptr;
  if (with != nullptr)
    return refuse(std::string("--autocast with ") + with, "is not priced beside autocast yet; drop one of them");
  // TRL's chunked loss and Liger's fused one are patched into the model's forward, so they run under the
  // autocast too; torchtune's run outside it, in recipes that have none.
  if (o.loss == nn::CausalLMLoss::kTorchtuneChunked || o.loss == nn::CausalLMLoss::kTorchtuneLinear)
    return refuse("--autocast with --loss " + std::string(nn::causal_lm_loss_name(o.loss)),
                  "accelerate's autocast is priced around the losses the HF Trainer and TRL run inside the model's "
                  "forward; give --loss hf, trl-chunked-nll or liger-flce");
  const bool other_mode = (o.recompute != Recompute::kNone && o.recompute != Recompute::kFull &&
                           o.recompute != Recompute::kFullReentrant) ||
                          !o.recompute_by_kind.empty() || o.recompute_every_nth_layer > 0;
  if (other_mode)
    return refuse("--autocast with --recompute",
                  "autocast is priced with no checkpointing or with the HF Trainer's gradient checkpointing "
                  "(reentrant or not) yet; give none, full or full-reentrant");
  return {};
}

}  // namespace census
