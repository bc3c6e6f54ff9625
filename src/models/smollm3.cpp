// SmolLM3 (transformers/models/smollm3/modeling_smollm3.py, Transformers 5): Llama's layer, with no
// rotary in the layers no_rope_layers marks 0 (every fourth by default: NoPE layers). The census names
// a layer's kind by that ("rope" or "nope"); its sliding window, where use_sliding_window sets one,
// changes no shape the census counts.
#include "models/llama.h"

namespace census {
namespace {

Result<ModelConfig> read_smollm3(const ConfigReader& r);

std::unique_ptr<DecoderLayer> build_smollm3_layer(const ModelConfig& config, int64_t index) {
  const bool use_rope = config.layer_types[static_cast<size_t>(index)] == "rope";
  return std::make_unique<LlamaDecoderLayer>(config, index, build_dense_mlp, use_rope);
}

// no_rope_layers: one 0 or 1 per layer (1: the layer rotates); by default 0 every
// no_rope_layer_interval-th layer. Each layer's kind is "rope" or "nope". SmolLM3Config reads "at least"
// one entry per layer (its layers index the list), so a longer list runs with its first entries.
// layer_types only chooses each layer's mask (full or sliding), which changes no shape counted; it is
// checked as the config class checks it and then read no further.
Status read_no_rope_layers(const ConfigReader& r, ModelConfig& c) {
  if (r.has("layer_types"))
    CENSUS_TRY(r.layer_kinds("layer_types", c.num_hidden_layers, {"full_attention", "sliding_attention"}));
  c.layer_types.clear();
  if (!r.has("no_rope_layers")) {
    CENSUS_ASSIGN(const int64_t interval, r.size("no_rope_layer_interval", 4));
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) c.layer_types.push_back((i + 1) % interval ? "rope" : "nope");
    return {};
  }
  CENSUS_ASSIGN(const std::vector<bool> use_rope, r.layer_flags("no_rope_layers", c.num_hidden_layers, PerLayer::kCut));
  for (const bool rope : use_rope) c.layer_types.push_back(rope ? "rope" : "nope");
  return {};
}

}  // namespace

CENSUS_FAMILY(kSmolLM3Family) = {.model_type = "smollm3", .read = read_smollm3, .build_layer = build_smollm3_layer, .build_final_norm = build_llama_final_norm, .liger_patches = true, .liger_kernels = true,
                                 .peft_lora = true, .autocast = true};

namespace {

// SmolLM3Config: SmolLM3-3B's sizes by default; attention_bias biases q, k, v and o.
Result<ModelConfig> read_smollm3(const ConfigReader& r) {
  CENSUS_ASSIGN(ModelConfig c, read_llama_like(r, kSmolLM3Family, {128256, 2048, 11008, 36, 16, 4, std::nullopt}));
  CENSUS_TRY(read_attention_bias(r, c));
  CENSUS_ASSIGN(c.mlp_bias, r.flag("mlp_bias", false));
  CENSUS_TRY(read_no_rope_layers(r, c));
  return c;
}

}  // namespace
}  // namespace census
