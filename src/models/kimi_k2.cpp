// Kimi K2, K2.5 and K2.6 (their text config's model_type kimi_k2): DeepSeek-V3's layer and config, as
// Transformers reads them (Kimi_K25Config maps a kimi_k2 text_config to DeepseekV3Config; a kimi_k25
// wrapper is read through its text_config, models/registry.cpp). Multi-head latent attention, a dense
// MLP on the first first_k_dense_replace layers and DeepseekV3MoE on the rest (models/deepseek_v3.h).
#include "models/deepseek_v3.h"

namespace census {
namespace {

Result<ModelConfig> read_kimi_k2(const ConfigReader& r);

std::unique_ptr<DecoderLayer> build_kimi_k2_layer(const ModelConfig& config, int64_t index) {
  return std::make_unique<DeepseekV3DecoderLayer>(config, index);
}

}  // namespace

CENSUS_FAMILY(kKimiK2Family) = {"kimi_k2", read_kimi_k2, build_kimi_k2_layer, build_llama_final_norm};

namespace {

// DeepseekV3Config's fields and defaults.
Result<ModelConfig> read_kimi_k2(const ConfigReader& r) { return read_deepseek_v3_config(r, kKimiK2Family); }

}  // namespace
}  // namespace census
