// File: gemma.h
// Gemma's decoder layers (transformers/models/gemma{,2,3}/modeling_gemma{,2,3}.py, Transformers 5):
// Llama's layer with GemmaRMSNorm ((1 + w) in fp32) and a gelu-tanh MLP (Gemma); with sandwich norms
// around the attention and the MLP (Gemma2, Gemma3); with per-head q/k norms on the transposed
// queries and keys (Gemma3). Sliding and full layers run the same ops under the flash contract and
// are kinds of their own, as layer_types states them.
//
// Legend: S = seq_length, H = hidden_size, Nh = heads, Nkv = key/value heads, D = head_dim.
#pragma once

#include <optional>

#include "models/config.h"
#include "models/config_reader.h"
#include "nn/attention_kernel.h"
#include "nn/linear.h"
#include "nn/mlp.h"
#include "nn/rms_norm.h"
#include "nn/rotary.h"

namespace census {

class GemmaAttention {
 public:
  GemmaAttention(const ModelConfig& config, nn::ParameterList& params);
  Tensor forward(const Tensor& hidden_states, const nn::PositionEmbeddings& positions) const;

 private:
  std::string path_ = "self_attn";
  nn::KernelProfile kernels_;  // whose flash contract the attention runs
  int64_t head_dim_;
  nn::Linear q_proj;
  nn::Linear k_proj;
  nn::Linear v_proj;
  nn::Linear o_proj;
  std::optional<nn::GemmaRMSNorm> q_norm;  // Gemma3, over D
  std::optional<nn::GemmaRMSNorm> k_norm;
};

class GemmaDecoderLayer final : public DecoderLayer {
 public:
  explicit GemmaDecoderLayer(const ModelConfig& config);
  nn::PositionEmbeddings embed_positions(const Tensor& hidden) const override { return rotary_emb.forward(hidden); }
  Tensor forward(const Tensor& hidden_states, const nn::PositionEmbeddings& positions) const override;
  int64_t final_norm_parameters() const override { return hidden_size_; }

 private:
  int64_t hidden_size_;
  bool sandwich_;  // Gemma2 and Gemma3: norms after the attention and around the MLP
  GemmaAttention self_attn;
  nn::GatedMLP mlp;
  nn::GemmaRMSNorm input_layernorm;
  nn::GemmaRMSNorm post_attention_layernorm;
  std::optional<nn::GemmaRMSNorm> pre_feedforward_layernorm;
  std::optional<nn::GemmaRMSNorm> post_feedforward_layernorm;
  nn::RotaryEmbedding rotary_emb;
};

Result<ModelConfig> read_gemma(const ConfigReader& reader, const Family& family);
Result<ModelConfig> read_gemma2(const ConfigReader& reader, const Family& family);
Result<ModelConfig> read_gemma3_text(const ConfigReader& reader, const Family& family);
std::unique_ptr<DecoderLayer> build_gemma_layer(const ModelConfig& config, int64_t index);
std::unique_ptr<nn::Norm> build_gemma_final_norm(const ModelConfig& config, nn::ParameterList& params);

}  // namespace census
