#include "step/quantize_choice.h"

#include <array>
#include <string>
#include <string_view>

namespace census {
namespace {

// The model types whose 4-bit base the oracle checks (scripts/oracle/census_oracle_steady_qlora.py).
constexpr std::array<std::string_view, 9> kCheckedModelTypes{"llama", "mistral", "qwen2", "qwen3", "gemma3_text",
                                                            "mixtral", "qwen3_moe", "gpt_oss", "qwen3_next"};

}  // namespace

Status check_quantize(const ModelConfig& config, const StepOptions& o) {
  if (!o.quantize) return {};
  const nn::Bnb4bitConfig& q = *o.quantize;
  if (!o.lora)
    return refuse("--quantize without --lora",
                  "a 4-bit base is frozen and has nothing to train; add adapters (--lora, --lora-rank, ...)");
  bool checked = false;
  std::string names;
  for (std::string_view type : kCheckedModelTypes) {
    checked = checked || config.model_type == type;
    names += (names.empty() ? "" : ", ") + std::string(type);
  }
  if (!checked)
    return refuse("--quantize on " + config.model_type,
                  "a bitsandbytes 4-bit base is checked against the oracle on " + names +
                      "; it is not priced on this model type yet");
  // PEFT moves the adapters to the base layer's dtype, a Linear4bit's compute_dtype, before it upcasts them.
  if (o.lora->dtype == DType::kBFloat16 && q.compute_dtype != DType::kBFloat16)
    return refuse("--lora-dtype bf16 with --compute-dtype fp32",
                  "over a 4-bit base PEFT makes the adapters in the compute dtype, fp32 here; give --lora-dtype fp32, "
                  "or --compute-dtype bf16");
  return {};
}

}  // namespace census
