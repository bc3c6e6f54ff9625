// Qwen2 (transformers/models/qwen2/modeling_qwen2.py, Transformers 5): Llama's layer with q, k and v
// biased, o not.
#include "models/qwen2.h"

#include "models/llama.h"

namespace census {

Status read_qwen_layer_types(const ConfigReader& r, ModelConfig& c) {
  CENSUS_ASSIGN(const bool sliding, r.flag("use_sliding_window", false));
  CENSUS_ASSIGN(const int64_t window_layers, r.size("max_window_layers", 28));
  const bool has_window = sliding && r.has("sliding_window");
  c.layer_types.clear();
  for (int64_t i = 0; i < c.num_hidden_layers; ++i)
    c.layer_types.push_back(has_window && i >= window_layers ? "sliding_attention" : "full_attention");
  return {};
}

namespace {

Result<ModelConfig> read_qwen2(const ConfigReader& r);

std::unique_ptr<DecoderLayer> build_qwen2_layer(const ModelConfig& config, int64_t index) {
  return std::make_unique<LlamaDecoderLayer>(config, index);
}

}  // namespace

CENSUS_FAMILY(kQwen2Family) = {.model_type = "qwen2", .read = read_qwen2, .build_layer = build_qwen2_layer,
                               .build_final_norm = build_llama_final_norm, .class_prefix = "Qwen2",
                               .names_llama_tp_plan = true,
    .liger_patches = true, .liger_kernels = true, .float8_linears = true,
    .peft_lora = true, .lora_default_targets = "q_proj,v_proj", .bnb_4bit = true, .autocast = true};

namespace {

// Qwen2Config: q, k and v biased, o not.
Result<ModelConfig> read_qwen2(const ConfigReader& r) {
  CENSUS_ASSIGN(ModelConfig c, read_llama_like(r, kQwen2Family, {151936, 4096, 22016, 32, 32, 32, std::nullopt}));
  c.qkv_bias = true;
  CENSUS_TRY(read_qwen_layer_types(r, c));
  CENSUS_TRY(read_stated_layer_types(r, c));
  return c;
}

}  // namespace
}  // namespace census
