// File: moe_families.h
// Reading the configs of the Llama-like MoE families (Transformers 5's Qwen2MoeConfig,
// Qwen3MoeConfig, MixtralConfig): Llama's sizes with the family's defaults, and the experts.
#pragma once

#include "models/config.h"
#include "models/config_reader.h"

namespace census {

Result<ModelConfig> read_qwen2_moe(const ConfigReader& reader, const Family& family);
Result<ModelConfig> read_qwen3_moe(const ConfigReader& reader, const Family& family);
Result<ModelConfig> read_mixtral(const ConfigReader& reader, const Family& family);

// The routed experts every MoE family states: how many (under `experts_field`, or its alias in the
// family's attribute_map), how many a token picks, refusing what no router can run.
Status read_routed_experts(const ConfigReader& reader, const char* experts_field, const char* experts_alias,
                           int64_t default_experts, int64_t default_top_k, MoeConfig& moe);

// The Qwen MoE families' sparse layers (decoder_sparse_step, mlp_only_layers), the experts' width and
// norm_topk_prob, with the family's defaults.
Status read_qwen_sparse_layers(const ConfigReader& reader, ModelConfig& config, int64_t default_moe_width,
                               bool default_norm_topk_prob);

}  // namespace census
