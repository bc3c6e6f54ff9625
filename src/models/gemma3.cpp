// Gemma 3's text model (transformers/models/gemma3/modeling_gemma3.py, Transformers 5; model_type
// gemma3_text): Gemma 2's layer with per-head q/k norms on the transposed queries and keys; five
// sliding layers to one full by default.
#include "models/gemma.h"

namespace census {
namespace {

Result<ModelConfig> read_gemma3_text(const ConfigReader& r);

std::unique_ptr<DecoderLayer> build_gemma3_layer(const ModelConfig& config, int64_t /*index*/) {
  return std::make_unique<GemmaDecoderLayer>(config, /*sandwich=*/true);
}

}  // namespace

CENSUS_FAMILY(kGemma3TextFamily) = {
    .model_type = "gemma3_text",
    .read = read_gemma3_text,
    .build_layer = build_gemma3_layer,
    .build_final_norm = build_gemma_final_norm,
    .build_causal_lm = build_gemma_causal_lm,
    .rotary_per_layer_type = true,
    .ties_word_embeddings = true,
    .composite_ties_word_embeddings = true,
    .liger_patches = true, .liger_kernels = true,
    .float8_linears = true,
    .peft_lora = true, .lora_default_targets = "q_proj,v_proj", .bnb_4bit = true, .autocast = true,
};

namespace {

// Gemma3TextConfig: per-head q/k norms; sliding_window_pattern sliding layers to one full.
Result<ModelConfig> read_gemma3_text(const ConfigReader& r) {
  CENSUS_ASSIGN(ModelConfig c, read_gemma_config(r, kGemma3TextFamily, {262208, 2304, 9216, 26, 8, 4, 256}));
  c.qk_norm = true;
  CENSUS_ASSIGN(const int64_t period, r.size("sliding_window_pattern", 6));
  CENSUS_TRY(read_gemma_layer_types(r, c, period));
  CENSUS_TRY(read_final_logit_softcapping(r, c, 0));
  return c;
}

}  // namespace
}  // namespace census
