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

CENSUS_FAMILY(kMistralFamily) = {"mistral", read_mistral, build_mistral_layer, build_llama_final_norm, "Mistral"};

namespace {

// MistralConfig's defaults.
Result<ModelConfig> read_mistral(const ConfigReader& r) {
  return read_llama_like(r, kMistralFamily, {32000, 4096, 14336, 32, 32, 8, std::nullopt});
}

}  // namespace
}  // namespace census
