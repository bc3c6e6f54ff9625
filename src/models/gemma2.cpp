// Gemma 2 (transformers/models/gemma2/modeling_gemma2.py, Transformers 5): Gemma's attention and MLP
// with sandwich norms around the attention and the MLP; sliding and full layers alternate.
#include "models/gemma.h"

namespace census {
namespace {

Result<ModelConfig> read_gemma2(const ConfigReader& r);

std::unique_ptr<DecoderLayer> build_gemma2_layer(const ModelConfig& config, int64_t /*index*/) {
  return std::make_unique<GemmaDecoderLayer>(config, /*sandwich=*/true);
}

}  // namespace

CENSUS_FAMILY(kGemma2Family) = {
    .model_type = "gemma2",
    .read = read_gemma2,
    .build_layer = build_gemma2_layer,
    .build_final_norm = build_gemma_final_norm,
    .build_causal_lm = build_gemma_causal_lm,
    .ties_word_embeddings = true,
    .liger_patches = true, .liger_kernels = true,
    .peft_lora = true, .lora_default_targets = "q_proj,v_proj", .autocast = true,
};

namespace {

// Gemma2Config: sliding and full layers alternate by default.
Result<ModelConfig> read_gemma2(const ConfigReader& r) {
  CENSUS_ASSIGN(ModelConfig c, read_gemma_config(r, kGemma2Family, {256000, 2304, 9216, 26, 8, 4, 256}));
  CENSUS_TRY(read_gemma_layer_types(r, c, 2));
  CENSUS_TRY(read_final_logit_softcapping(r, c, 30.0));
  return c;
}

}  // namespace
}  // namespace census
