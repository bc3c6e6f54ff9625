// Qwen3 (transformers/models/qwen3/modeling_qwen3.py, Transformers 5): Llama's layer with per-head
// q/k RMSNorms over head_dim.
#include "models/llama.h"
#include "models/qwen2.h"

namespace census {
namespace {

Result<ModelConfig> read_qwen3(const ConfigReader& r);

std::unique_ptr<DecoderLayer> build_qwen3_layer(const ModelConfig& config, int64_t index) {
  return std::make_unique<LlamaDecoderLayer>(config, index);
}

}  // namespace

CENSUS_FAMILY(kQwen3Family) = {.model_type = "qwen3", .read = read_qwen3, .build_layer = build_qwen3_layer,
                               .build_final_norm = build_llama_final_norm, .class_prefix = "Qwen3",
                               .names_llama_tp_plan = true,
    .liger_patches = true, .liger_kernels = true, .float8_linears = true,
    .peft_lora = true, .lora_default_targets = "q_proj,v_proj", .bnb_4bit = true, .autocast = true};

namespace {

// Qwen3Config: head_dim 128 by default, per-head q/k norms, attention_bias for q, k, v and o.
Result<ModelConfig> read_qwen3(const ConfigReader& r) {
  CENSUS_ASSIGN(ModelConfig c, read_llama_like(r, kQwen3Family, {151936, 4096, 22016, 32, 32, 32, 128}));
  CENSUS_TRY(read_attention_bias(r, c));
  c.qk_norm = true;
  CENSUS_TRY(read_qwen_layer_types(r, c));
  CENSUS_TRY(read_stated_layer_types(r, c));
  return c;
}

}  // namespace
}  // namespace census
