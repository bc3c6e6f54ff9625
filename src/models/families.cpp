// The Llama-like families: each one's model_type, config defaults (its Transformers 5 config class)
// and the variations its modeling file makes to Llama's layer.
#include "models/families.h"

#include "models/deepseek_v3.h"
#include "models/gemma.h"
#include "models/gpt_oss.h"
#include "models/llama.h"
#include "models/moe_families.h"
#include "models/qwen3_5.h"
#include "models/qwen3_next.h"

namespace census {
namespace {

Result<ModelConfig> read_llama(const ConfigReader& r);
Result<ModelConfig> read_mistral(const ConfigReader& r);
Result<ModelConfig> read_qwen2(const ConfigReader& r);
Result<ModelConfig> read_qwen3(const ConfigReader& r);
Result<ModelConfig> read_qwen3_vl_text(const ConfigReader& r);
Result<ModelConfig> read_gemma_family(const ConfigReader& r);
Result<ModelConfig> read_gemma2_family(const ConfigReader& r);
Result<ModelConfig> read_gemma3_family(const ConfigReader& r);
Result<ModelConfig> read_qwen2_moe_family(const ConfigReader& r);
Result<ModelConfig> read_qwen3_moe_family(const ConfigReader& r);
Result<ModelConfig> read_mixtral_family(const ConfigReader& r);
Result<ModelConfig> read_deepseek_v3_family(const ConfigReader& r);
Result<ModelConfig> read_gpt_oss_family(const ConfigReader& r);
Result<ModelConfig> read_qwen3_next_family(const ConfigReader& r);
Result<ModelConfig> read_qwen3_5_text_family(const ConfigReader& r);
Result<ModelConfig> read_qwen3_5_moe_text_family(const ConfigReader& r);

const FamilyEntry kFamilies[] = {
    {{"llama", build_llama_layer, build_llama_final_norm, "Llama"}, read_llama},
    {{"mistral", build_llama_layer, build_llama_final_norm, "Mistral"}, read_mistral},
    {{"qwen2", build_llama_layer, build_llama_final_norm, "Qwen2"}, read_qwen2},
    {{"qwen3", build_llama_layer, build_llama_final_norm, "Qwen3"}, read_qwen3},
    {{"qwen3_vl_text", build_llama_layer, build_llama_final_norm}, read_qwen3_vl_text},
    {{"gemma", build_gemma_layer, build_gemma_final_norm}, read_gemma_family},
    {{"gemma2", build_gemma_layer, build_gemma_final_norm}, read_gemma2_family},
    {{"gemma3_text", build_gemma_layer, build_gemma_final_norm}, read_gemma3_family},
    {{"qwen2_moe", build_llama_layer, build_llama_final_norm, "Qwen2Moe"}, read_qwen2_moe_family},
    {{"qwen3_moe", build_llama_layer, build_llama_final_norm, "Qwen3Moe"}, read_qwen3_moe_family},
    {{"mixtral", build_llama_layer, build_llama_final_norm, "Mixtral"}, read_mixtral_family},
    {{"deepseek_v3", build_deepseek_v3_layer, build_llama_final_norm}, read_deepseek_v3_family},
    {{"gpt_oss", build_gpt_oss_layer, build_gpt_oss_final_norm}, read_gpt_oss_family},
    {{"qwen3_next", build_qwen3_next_layer, build_qwen3_next_final_norm}, read_qwen3_next_family},
    {{"qwen3_5_text", build_qwen3_5_layer, build_qwen3_next_final_norm}, read_qwen3_5_text_family},
    {{"qwen3_5_moe_text", build_qwen3_5_layer, build_qwen3_next_final_norm},
     read_qwen3_5_moe_text_family},
};

const Family& family(const char* model_type) {
  for (const FamilyEntry& entry : kFamilies)
    if (std::string_view(entry.family.model_type) == model_type) return entry.family;
  return kFamilies[0].family;
}

// Qwen2 and Qwen3 derive layer_types when the config does not state them: sliding attention from
// max_window_layers on, where use_sliding_window is set.
Status read_qwen_layer_types(const ConfigReader& r, ModelConfig& c) {
  auto sliding = r.flag("use_sliding_window", false);
  CENSUS_TRY(sliding);
  auto window_layers = r.size("max_window_layers", 28);
  CENSUS_TRY(window_layers);
  const bool has_window = *sliding && r.has("sliding_window");
  c.layer_types.clear();
  for (int64_t i = 0; i < c.num_hidden_layers; ++i)
    c.layer_types.push_back(has_window && i >= *window_layers ? "sliding_attention" : "full_attention");
  return {};
}

// LlamaConfig: attention_bias biases q, k, v and o; mlp_bias the MLP.
Result<ModelConfig> read_llama(const ConfigReader& r) {
  auto c = read_llama_like(r, family("llama"), {32000, 4096, 11008, 32, 32, std::nullopt, std::nullopt});
  CENSUS_TRY(c);
  auto attention_bias = r.flag("attention_bias", false);
  CENSUS_TRY(attention_bias);
  auto mlp_bias = r.flag("mlp_bias", false);
  CENSUS_TRY(mlp_bias);
  c->qkv_bias = c->o_bias = *attention_bias;
  c->mlp_bias = *mlp_bias;
  return c;
}

// MistralConfig: no biases; its sliding window changes no shape the census counts.
Result<ModelConfig> read_mistral(const ConfigReader& r) {
  return read_llama_like(r, family("mistral"), {32000, 4096, 14336, 32, 32, 8, std::nullopt});
}

// Qwen2Config: q, k and v biased, o not.
Result<ModelConfig> read_qwen2(const ConfigReader& r) {
  auto c = read_llama_like(r, family("qwen2"), {151936, 4096, 22016, 32, 32, 32, std::nullopt});
  CENSUS_TRY(c);
  c->qkv_bias = true;
  CENSUS_TRY(read_qwen_layer_types(r, *c));
  CENSUS_TRY(read_stated_layer_types(r, *c));
  return c;
}

// Qwen3Config: head_dim 128 by default, per-head q/k norms, attention_bias for q, k, v and o.
Result<ModelConfig> read_qwen3(const ConfigReader& r) {
  auto c = read_llama_like(r, family("qwen3"), {151936, 4096, 22016, 32, 32, 32, 128});
  CENSUS_TRY(c);
  auto attention_bias = r.flag("attention_bias", false);
  CENSUS_TRY(attention_bias);
  c->qkv_bias = c->o_bias = *attention_bias;
  c->qk_norm = true;
  CENSUS_TRY(read_qwen_layer_types(r, *c));
  CENSUS_TRY(read_stated_layer_types(r, *c));
  return c;
}

// Qwen3VLTextConfig (the text tower of Qwen3-VL, under its config's text_config): Qwen3's layer.
// Its rotary embeds a text token's position on three grids (mrope_section); that changes cos and
// sin's values, not their shape, and the layer receives them as Qwen3's does.
Result<ModelConfig> read_qwen3_vl_text(const ConfigReader& r) {
  auto c = read_llama_like(r, family("qwen3_vl_text"), {151936, 4096, 22016, 32, 32, std::nullopt, 128});
  CENSUS_TRY(c);
  auto attention_bias = r.flag("attention_bias", false);
  CENSUS_TRY(attention_bias);
  c->qkv_bias = c->o_bias = *attention_bias;
  c->qk_norm = true;
  return c;
}

Result<ModelConfig> read_gemma_family(const ConfigReader& r) { return read_gemma(r, family("gemma")); }
Result<ModelConfig> read_gemma2_family(const ConfigReader& r) { return read_gemma2(r, family("gemma2")); }
Result<ModelConfig> read_gemma3_family(const ConfigReader& r) { return read_gemma3_text(r, family("gemma3_text")); }
Result<ModelConfig> read_qwen2_moe_family(const ConfigReader& r) { return read_qwen2_moe(r, family("qwen2_moe")); }
Result<ModelConfig> read_qwen3_moe_family(const ConfigReader& r) { return read_qwen3_moe(r, family("qwen3_moe")); }
Result<ModelConfig> read_mixtral_family(const ConfigReader& r) { return read_mixtral(r, family("mixtral")); }
Result<ModelConfig> read_deepseek_v3_family(const ConfigReader& r) { return read_deepseek_v3(r, family("deepseek_v3")); }
Result<ModelConfig> read_gpt_oss_family(const ConfigReader& r) { return read_gpt_oss(r, family("gpt_oss")); }
Result<ModelConfig> read_qwen3_next_family(const ConfigReader& r) { return read_qwen3_next(r, family("qwen3_next")); }
Result<ModelConfig> read_qwen3_5_text_family(const ConfigReader& r) { return read_qwen3_5_text(r, family("qwen3_5_text")); }
Result<ModelConfig> read_qwen3_5_moe_text_family(const ConfigReader& r) {
  return read_qwen3_5_moe_text(r, family("qwen3_5_moe_text"));
}

}  // namespace

std::span<const FamilyEntry> families() { return kFamilies; }

}  // namespace census
