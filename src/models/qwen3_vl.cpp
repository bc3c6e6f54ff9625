// Qwen3-VL's text tower (transformers/models/qwen3_vl/modeling_qwen3_vl.py, Transformers 5; model_type
// qwen3_vl_text, under a qwen3_vl config's text_config): Qwen3's layer. Its rotary embeds a text
// token's position on three grids (mrope_section); that changes cos and sin's values, not their shape,
// and the layer receives them as Qwen3's does.
#include "models/llama.h"

namespace census {
namespace {

Result<ModelConfig> read_qwen3_vl_text(const ConfigReader& r);

std::unique_ptr<DecoderLayer> build_qwen3_vl_text_layer(const ModelConfig& config, int64_t index) {
  return std::make_unique<LlamaDecoderLayer>(config, index);
}

}  // namespace

CENSUS_FAMILY(kQwen3VlTextFamily) = {"qwen3_vl_text", read_qwen3_vl_text, build_qwen3_vl_text_layer,
                                     build_llama_final_norm};

namespace {

// Qwen3VLTextConfig: Qwen3's fields with its own defaults.
Result<ModelConfig> read_qwen3_vl_text(const ConfigReader& r) {
  CENSUS_ASSIGN(ModelConfig c,
                read_llama_like(r, kQwen3VlTextFamily, {151936, 4096, 22016, 32, 32, std::nullopt, 128}));
  CENSUS_TRY(read_attention_bias(r, c));
  c.qk_norm = true;
  return c;
}

}  // namespace
}  // namespace census
