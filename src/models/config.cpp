#include "models/config.h"

#include <algorithm>

namespace census {

bool is_moe_layer(const ModelConfig& c, int64_t index) {
  const MoeConfig& moe = c.moe;
  if (moe.num_experts == 0 || index < moe.first_k_dense_replace) return false;
  if ((index + 1) % moe.decoder_sparse_step != 0) return false;
  // mlp_only_layers is read sorted (ConfigReader::layer_indices).
  return !std::binary_search(moe.mlp_only_layers.begin(), moe.mlp_only_layers.end(), index);
}

Status check_liger_kernels(const ModelConfig& config) {
  if (!config.liger.any()) return {};
  const std::string flag = "--liger on " + config.model_type;
  if (!config.family->liger_patches)
    return refuse(flag, "Liger has no patch for this model type (MODEL_TYPE_TO_APPLY_LIGER_FN); drop --liger");
  if (!config.family->liger_kernels)
    return refuse(flag, "Liger's patch for it swaps modules the census does not price yet (it prices llama, mistral, "
                        "qwen2, qwen3, smollm3, gemma, gemma2 and gemma3_text's); drop --liger, or give --loss "
                        "liger-flce for its fused loss alone");
  // calculate_settings raises where a kernel's row (next_power_of_2 of it) is wider than 65,536 elements.
  const int64_t widest = std::max(config.liger.rms_norm ? config.hidden_size : 0,
                                  config.liger.swiglu ? config.intermediate_size : 0);
  if (widest > 65'536)
    return refuse(flag, "a row of " + std::to_string(widest) + " elements: Liger's kernels launch on at most 65,536 "
                        "(calculate_settings raises past it); drop --liger");
  return {};
}

std::vector<std::string> layer_kinds(const ModelConfig& config) {
  if (config.kinds_from_layer_types) return config.layer_types;
  const int64_t layers = config.num_hidden_layers;
  std::vector<bool> moe(static_cast<size_t>(layers));
  for (int64_t i = 0; i < layers; ++i) moe[static_cast<size_t>(i)] = is_moe_layer(config, i);
  const bool uniform_ffn = std::all_of(moe.begin(), moe.end(), [&](bool each) { return each == moe.front(); });
  const std::vector<std::string>& types = config.layer_types;
  const bool uniform_attention =
      std::all_of(types.begin(), types.end(), [&](const std::string& type) { return type == types.front(); });
  std::vector<std::string> kinds;
  kinds.reserve(static_cast<size_t>(layers));
  for (size_t i = 0; i < static_cast<size_t>(layers); ++i) {
    const char* ffn = moe[i] ? "moe" : "dense";
    if (uniform_attention && uniform_ffn) kinds.emplace_back("decoder");
    else if (uniform_attention) kinds.emplace_back(ffn);
    else if (uniform_ffn) kinds.push_back(types[i]);
    else kinds.push_back(types[i] + "_" + ffn);
  }
  return kinds;
}

std::string layer_kind(const ModelConfig& config, int64_t index) {
  return layer_kinds(config)[static_cast<size_t>(index)];
}

std::vector<LayerGroup> layer_stack(const ModelConfig& config) {
  std::vector<LayerGroup> groups;
  for (std::string& kind : layer_kinds(config)) {
    if (!groups.empty() && groups.back().kind == kind) ++groups.back().count;
    else groups.push_back({std::move(kind), 1});
  }
  // Multi-token-prediction layers repeat the last body kind, stacked after it.
  if (config.num_mtp_layers > 0 && !groups.empty()) groups.push_back({groups.back().kind, config.num_mtp_layers, true});
  return groups;
}

namespace {

// Widths with a 0 meaning "the model has none" stay 0.
constexpr TpDividedField kTpDividedFields[] = {
    {"num_attention_heads", [](const ModelConfig& c) { return c.num_attention_heads; },
     [](ModelConfig& c, int64_t v) { c.num_attention_heads = v; }},
    {"num_key_value_heads", [](const ModelConfig& c) { return c.num_key_value_heads; },
     [](ModelConfig& c, int64_t v) { c.num_key_value_heads = v; }},
    {"intermediate_size", [](const ModelConfig& c) { return c.intermediate_size; },
     [](ModelConfig& c, int64_t v) { c.intermediate_size = v; }},
    // The experts' and shared experts' widths; the number of experts is expert parallelism's to divide.
    {"moe_intermediate_size", [](const ModelConfig& c) { return c.moe.moe_intermediate_size; },
     [](ModelConfig& c, int64_t v) { c.moe.moe_intermediate_size = v; }},
    {"shared_expert_intermediate_size", [](const ModelConfig& c) { return c.moe.shared_expert_intermediate_size; },
     [](ModelConfig& c, int64_t v) { c.moe.shared_expert_intermediate_size = v; }},
    {"linear_num_key_heads", [](const ModelConfig& c) { return c.linear_num_key_heads; },
     [](ModelConfig& c, int64_t v) { c.linear_num_key_heads = v; }},
    {"linear_num_value_heads", [](const ModelConfig& c) { return c.linear_num_value_heads; },
     [](ModelConfig& c, int64_t v) { c.linear_num_value_heads = v; }},
    // Gemma 4's full-attention layers' K/V heads (its sliding layers' are num_key_value_heads).
    {"num_global_key_value_heads", [](const ModelConfig& c) { return c.gemma4.num_global_key_value_heads; },
     [](ModelConfig& c, int64_t v) { c.gemma4.num_global_key_value_heads = v; }},
};

}  // namespace

std::span<const TpDividedField> tp_divided_fields() { return kTpDividedFields; }

ModelConfig tp_config(const ModelConfig& config, int64_t tp) {
  ModelConfig out = config;
  for (const TpDividedField& field : kTpDividedFields) {
    const int64_t value = field.get(config);
    if (value > 0) field.set(out, std::max<int64_t>(1, value / tp));
  }
  return out;
}

}  // namespace census
