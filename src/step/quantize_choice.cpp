#include "step/quantize_choice.h"

#include <string>

#include "models/registry.h"

namespace census {

Status check_quantize(const ModelConfig& config, const StepOptions& o) {
  if (!o.quantize) return {};
  const nn::Bnb4bitConfig& q = *o.quantize;
  if (!o.lora)
    return refuse("--quantize without --lora",
                  "a 4-bit base is frozen and has nothing to train; add adapters (--lora, --lora-rank, ...)");
  if (!config.family->bnb_4bit) {
    std::string checked;
    for (const Family* family : families())
      if (family->bnb_4bit) checked += (checked.empty() ? "" : ", ") + std::string(family->model_type);
    return refuse("--quantize on " + config.model_type,
                  "a bitsandbytes 4-bit base is checked against the oracle on " + checked +
                      "; it is not priced on this model type yet");
  }
  // PEFT moves the adapters to the base layer's dtype, a Linear4bit's compute_dtype, before it upcasts them.
  if (o.lora->dtype == DType::kBFloat16 && q.compute_dtype != DType::kBFloat16)
    return refuse("--lora-dtype bf16 with --compute-dtype fp32",
                  "over a 4-bit base PEFT makes the adapters in the compute dtype, fp32 here; give --lora-dtype fp32, "
                  "or --compute-dtype bf16");
  return {};
}

}  // namespace census
