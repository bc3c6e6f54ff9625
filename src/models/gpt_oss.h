// File: gpt_oss.h
// GPT-OSS's decoder layer (transformers/models/gpt_oss/modeling_gpt_oss.py, Transformers 5): Llama's
// attention with biased projections, per-head sinks handed to the kernel and a rotary on two halves;
// a MoE block on every layer (biased softmax-after-top-k router; biased, transposed experts with
// GPT-OSS's clamped gate); norms that weight the fp32 states. Sliding and full layers (layer_types)
// run the same ops under the flash contract and are kinds of their own.
//
// Legend: S = seq_length, H = hidden_size, Nh = heads, Nkv = key/value heads, D = head_dim, T = tokens,
// E = experts, K = experts per token, I = intermediate_size (an expert's width).
#pragma once

#include "models/config.h"
#include "models/config_reader.h"
#include "nn/attention_kernel.h"
#include "nn/linear.h"
#include "nn/moe.h"
#include "nn/rms_norm.h"
#include "nn/rotary.h"

namespace census {

// The attention: q, k, v, o biased; the sinks (Nh) a parameter the kernel takes, whose contract
// saves what the flash kernel saves.
class GptOssAttention {
 public:
  GptOssAttention(const ModelConfig& config, nn::ParameterList& params);
  Tensor forward(const Tensor& hidden_states, const nn::PositionEmbeddings& positions) const;

 private:
  std::string path_ = "self_attn";
  nn::KernelProfile kernels_;  // whose flash contract the attention runs
  int64_t head_dim_;
  nn::Linear q_proj;
  nn::Linear k_proj;
  nn::Linear v_proj;
  nn::Linear o_proj;
  Tensor sinks_;  // (Nh)
};

// GptOssTopKRouter: logits = x W^T + b (addmm, which keeps x); top-k of the bf16 logits; softmax over
// the K values in bf16, which keeps its (T, K) result as the weights.
class GptOssTopKRouter {
 public:
  GptOssTopKRouter(const ModelConfig& config, nn::ParameterList& params);
  nn::Routing forward(const Tensor& hidden_states) const;

 private:
  std::string path_ = "mlp.router";
  int64_t top_k_;
  Tensor weight_;  // (E, H)
  Tensor bias_;    // (E)
};

class GptOssMLP final : public nn::FeedForward {
 public:
  GptOssMLP(const ModelConfig& config, nn::ParameterList& params);
  Tensor forward(const Tensor& hidden_states) const override;

 private:
  std::string path_ = "mlp";
  GptOssTopKRouter router;
  nn::Experts experts;
};

class GptOssDecoderLayer final : public DecoderLayer {
 public:
  explicit GptOssDecoderLayer(const ModelConfig& config);
  nn::PositionEmbeddings embed_positions(const Tensor& hidden) const override { return rotary_emb.forward(hidden); }
  Tensor forward(const Tensor& hidden_states, const nn::PositionEmbeddings& positions) const override;
  int64_t final_norm_parameters() const override { return hidden_size_; }

 private:
  int64_t hidden_size_;
  GptOssAttention self_attn;
  GptOssMLP mlp;
  nn::GptOssRMSNorm input_layernorm;
  nn::GptOssRMSNorm post_attention_layernorm;
  nn::RotaryEmbedding rotary_emb;  // cos and sin D/2 wide
};

std::unique_ptr<DecoderLayer> build_gpt_oss_layer(const ModelConfig& config, int64_t index);
std::unique_ptr<nn::Norm> build_gpt_oss_final_norm(const ModelConfig& config, nn::ParameterList& params);

}  // namespace census
