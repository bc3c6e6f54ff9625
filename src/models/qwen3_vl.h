// File: qwen3_vl.h
// The causal LM of Qwen3-VL's text towers (qwen3_vl_text, qwen3_vl_moe_text) and of Qwen3.5's
// (qwen3_5_text, qwen3_5_moe_text), whose text models compute their rotary on three grids
// (nn::MultiGridRotaryEmbedding: cos and sin one per sequence, (B, S, D)); otherwise Llama's model.
#pragma once

#include <memory>

#include "models/causal_lm.h"

namespace census {

std::unique_ptr<CausalLM> build_multi_grid_rotary_causal_lm(const ModelConfig& config, const ModelConfig& layer_config,
                                                            ModelChunk chunk);

}  // namespace census
