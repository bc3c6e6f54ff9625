// File: llama.h
// Llama (transformers/models/llama/modeling_llama.py, Transformers 5): its decoder layer, which
// Mistral, Qwen2, Qwen3 and their MoE variants (Qwen2-MoE, Qwen3-MoE, Mixtral) copy through
// Transformers' modular files: the same modules and statement order, with biased q/k/v projections
// (Qwen2) or per-head q/k RMSNorm (Qwen3) as their configs state, and the family's feed-forward (a
// MoE block where the config makes a layer sparse). Also what those families' config readers share.
//
// Legend: S = seq_length, H = hidden_size, Nh = heads, Nkv = key/value heads, D = head_dim, I = intermediate.
#pragma once

#include <optional>

#include "models/config.h"
#include "models/config_reader.h"
#include "nn/attention_kernel.h"
#include "nn/hyperparallel.h"
#include "nn/linear.h"
#include "nn/mlp.h"
#include "nn/rms_norm.h"
#include "nn/rotary.h"

namespace census {

class LlamaAttention {
 public:
  // `use_rope` false: a NoPE layer's attention, its queries and keys not rotated (SmolLM3).
  LlamaAttention(const ModelConfig& config, nn::ParameterList& params, bool use_rope = true);
  Tensor forward(const Tensor& hidden_states, const nn::PositionEmbeddings& positions) const;

 private:
  std::string path_ = "self_attn";
  nn::KernelProfile kernels_;  // whose flash contract the attention runs
  bool liger_rope_;            // Liger's rotary in place of apply_rotary_pos_emb (nn/liger_kernels.h)
  int64_t head_dim_;
  double residual_dropout_;  // on o_proj's output (Seed-OSS); 0 runs nothing
  bool use_rope_;
  nn::Linear q_proj;  // H -> Nh*D
  nn::Linear k_proj;  // H -> Nkv*D
  nn::Linear v_proj;  // H -> Nkv*D
  nn::Linear o_proj;  // Nh*D -> H
  std::optional<nn::LlamaRMSNorm> q_norm;  // over D, Qwen3
  std::optional<nn::LlamaRMSNorm> k_norm;
};

// A layer's feed-forward ("mlp"), as its family builds it for layer `index`.
using FeedForwardBuilder = std::unique_ptr<nn::FeedForward> (*)(const ModelConfig& config, int64_t index,
                                                                nn::ParameterList& params);

// LlamaMLP: the dense gated MLP of intermediate_size.
std::unique_ptr<nn::FeedForward> build_dense_mlp(const ModelConfig& config, int64_t index, nn::ParameterList& params);

class LlamaDecoderLayer final : public DecoderLayer {
 public:
  LlamaDecoderLayer(const ModelConfig& config, int64_t index, FeedForwardBuilder build_mlp = build_dense_mlp,
                    bool use_rope = true);
  nn::PositionEmbeddings embed_positions(const Tensor& hidden) const override { return rotary_emb.forward(hidden); }
  Tensor forward(const Tensor& hidden_states, const nn::PositionEmbeddings& positions) const override;
  int64_t final_norm_parameters() const override { return hidden_size_; }

  std::vector<Tensor> registered_buffers() const override { return mlp->buffers(); }

 private:
  int64_t hidden_size_;
  // Transformers' attention, or HyperParallel's fused GQAAttention where a replacement selects it.
  std::optional<LlamaAttention> self_attn;
  std::optional<nn::GQAAttention> fused_attn;
  std::unique_ptr<nn::FeedForward> mlp;  // dense, or the family's MoE block
  std::unique_ptr<nn::Norm> input_layernorm;  // LlamaRMSNorm, or the fused RMSNorm
  std::unique_ptr<nn::Norm> post_attention_layernorm;
  nn::RotaryEmbedding rotary_emb;  // the model's, held here so one layer can run alone
};

// The config fields every Llama-like family reads, with that family's defaults.
struct LlamaLikeDefaults {
  int64_t vocab_size;
  int64_t hidden_size;
  int64_t intermediate_size;
  int64_t num_hidden_layers;
  int64_t num_attention_heads;
  std::optional<int64_t> num_key_value_heads;  // nullopt: as many as attention heads
  std::optional<int64_t> head_dim;             // nullopt: hidden_size / num_attention_heads
};

// Read the sizes shared by the Llama-like families (and Gemma's), refusing what cannot be priced.
Result<ModelConfig> read_llama_like(const ConfigReader& reader, const Family& family, const LlamaLikeDefaults& defaults);
// attention_bias (default false) biases q, k, v and o, as most Llama-like configs state it.
Status read_attention_bias(const ConfigReader& reader, ModelConfig& config);
// layer_types as the config states it, replacing the family's default: one known kind per layer.
Status read_stated_layer_types(const ConfigReader& reader, ModelConfig& config);
// partial_rotary_factor, in rope_parameters or at the top level (`default_factor` where neither
// states it): rotary_dim = int(head_dim * factor), refused unless even and positive.
Status read_rotary_dim(const ConfigReader& reader, ModelConfig& config, double default_factor);
// The MLP's activation from `field` (hidden_act, or Gemma's hidden_activation): silu or gelu_pytorch_tanh.
Result<nn::HiddenAct> read_hidden_act(const ConfigReader& reader, const char* field, const std::string& fallback);
std::unique_ptr<nn::Norm> build_llama_final_norm(const ModelConfig& config, nn::ParameterList& params);
// The family's RMSNorm at `path`: Llama's, or the fused one where `replacement` says so.
std::unique_ptr<nn::Norm> build_llama_norm(const ModelConfig& config, std::optional<FusedModule> replacement,
                                           const std::string& path, int64_t dim, nn::ParameterList& params);
// The fused module replacing layer `index`'s module at `path` ("self_attn", "mlp.experts") of the
// family's class `name` ("Attention" -> "Qwen3MoeAttention"), if the run's replacements select one.
// Names are formed only where there are replacements: a plain census builds no string.
std::optional<FusedModule> layer_replacement(const ModelConfig& config, int64_t index, const char* path, const char* name);

}  // namespace census
