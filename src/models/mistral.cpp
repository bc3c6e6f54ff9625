// Mistral (transformers/models/mistral/modeling_mistral.py, Transformers 5): Llama's layer, no biases.
// Its sliding window changes no shape the census counts.
#include "models/llama.h"

namespace census {
namespace {

Result<ModelConfig> read_mistral(const ConfigReader& r);

std::unique_ptr<DecoderLayer> build_mistral_layer(const ModelConfig& config, int64_t index) {
  return std::make_unique<LlamaDecoderLayer>(config, index);
}

}  // namespace

CENSUS_FAMILY(kMistralFamily) = {.model_type = "mistral", .read = read_mistral, .build_layer = build_mistral_layer,
                                 .build_final_norm = build_llama_final_norm, .class_prefix = "Mistral",
                                 .names_llama_tp_plan = true,
    .liger_patches = true, .liger_kernels = true, .float8_linears = true,
    .peft_lora = true, .lora_default_targets = "q_proj,v_proj", .bnb_4bit = true, .autocast = true};

namespace {

// MistralConfig's defaults.
Result<ModelConfig> read_mistral(const ConfigReader& r) {
  return read_llama_like(r, kMistralFamily, {32000, 4096, 14336, 32, 32, 8, std::nullopt});
}

}  // namespace
}  // namespace census
