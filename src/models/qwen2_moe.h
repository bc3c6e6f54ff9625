// File: qwen2_moe.h
// What the Qwen MoE families share with Qwen2-MoE (transformers/models/qwen2_moe/, Transformers 5):
// the sparse layers a config states, and Qwen2MoeSparseMoeBlock (a sigmoid-gated shared expert beside
// the routed experts), which Qwen3-Next and Qwen3.5-MoE copy.
#pragma once

#include "models/config.h"
#include "nn/mlp.h"

namespace census {

// The Qwen MoE families' sparse layers (decoder_sparse_step, mlp_only_layers), the experts' width and
// norm_topk_prob, with the family's defaults.
Status read_qwen_sparse_layers(const ConfigReader& reader, ModelConfig& config, int64_t default_moe_width,
                               bool default_norm_topk_prob);

// Layer `index`'s feed-forward: Qwen2MoeSparseMoeBlock where the config makes it sparse, else the
// dense MLP of intermediate_size.
std::unique_ptr<nn::FeedForward> build_qwen2_moe_mlp(const ModelConfig& config, int64_t index, nn::ParameterList& params);

}  // namespace census
