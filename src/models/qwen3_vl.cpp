// Qwen3-VL's text tower (transformers/models/qwen3_vl/modeling_qwen3_vl.py, Transformers 5; model_type
// qwen3_vl_text, under a qwen3_vl config's text_config): Qwen3's layer. Its rotary embeds a text
// token's position on three grids (mrope_section); that changes cos and sin's values, not their shape,
// and the layer receives them as Qwen3's does.
#include "models/qwen3_vl.h"

#include "models/llama.h"
#include "nn/rotary.h"

namespace census {

namespace {

// Qwen3VLTextModel's rotary, computed once for every layer: the model's own module, its inv_freq and
// original_inv_freq its buffers (the layers' rotaries serve a layer censused alone).
class MultiGridRotaryCausalLM final : public CausalLM {
 public:
  MultiGridRotaryCausalLM(const ModelConfig& c, const ModelConfig& layer_config, ModelChunk chunk)
      : CausalLM(c, layer_config, chunk), rotary_emb(c.rotary_dim > 0 ? c.rotary_dim : c.head_dim) {
    state_rotary_buffers({rotary_emb.inv_freq()});
  }

 protected:
  std::vector<nn::PositionEmbeddings> embed_positions(const Tensor& inputs_embeds) const override {
    return {rotary_emb.forward(inputs_embeds)};
  }

 private:
  nn::MultiGridRotaryEmbedding rotary_emb;
};

}  // namespace

std::unique_ptr<CausalLM> build_multi_grid_rotary_causal_lm(const ModelConfig& config, const ModelConfig& layer_config,
                                                            ModelChunk chunk) {
  return make_causal_lm<MultiGridRotaryCausalLM>(config, layer_config, chunk);
}

namespace {

Result<ModelConfig> read_qwen3_vl_text(const ConfigReader& r);

std::unique_ptr<DecoderLayer> build_qwen3_vl_text_layer(const ModelConfig& config, int64_t index) {
  return std::make_unique<LlamaDecoderLayer>(config, index);
}

}  // namespace

CENSUS_FAMILY(kQwen3VlTextFamily) = {
    .model_type = "qwen3_vl_text",
    .read = read_qwen3_vl_text,
    .build_layer = build_qwen3_vl_text_layer,
    .build_final_norm = build_llama_final_norm,
    .build_causal_lm = build_multi_grid_rotary_causal_lm,
    .liger_patches = true,
};

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
