// File: qwen3_next.h
// Qwen3-Next's decoder layers (transformers/models/qwen3_next/modeling_qwen3_next.py, Transformers 5):
// each layer mixes its tokens with a gated delta net (linear_attention) or a gated attention
// (full_attention), as layer_types states, then runs its feed-forward. Norms are (1 + w) RMSNorms.
//
//   Qwen3NextGatedDeltaNet: fused in_proj_qkvz / in_proj_ba, the causal depthwise conv with silu over
//     q, k and v, l2-normalised q and k, beta = sigmoid(b), g = -exp(A_log) * softplus(a + dt_bias), the
//     gated delta rule (nn/gated_delta_rule.h), the gated RMSNorm and out_proj.
//   Qwen3NextAttention (nn/gated_attention.h): q_proj doubled for an output gate, per-head (1 + w) q/k
//     norms, partial rotary, flash attention, the output times sigmoid(gate), o_proj.
//
// Legend: S = seq_length, H = hidden_size, Nk / Nv = linear key / value heads, Dk / Dv = their head
// dims, r = Nv / Nk, N = attention heads, Nkv = key/value heads, D = head_dim.
#pragma once

#include <optional>

#include "models/config.h"
#include "models/config_reader.h"
#include "nn/attention_kernel.h"
#include "nn/gated_attention.h"
#include "models/llama.h"
#include "nn/linear.h"
#include "nn/mlp.h"
#include "nn/rms_norm.h"
#include "nn/rms_norm_gated.h"
#include "nn/rotary.h"

namespace census {

class Qwen3NextGatedDeltaNet {
 public:
  Qwen3NextGatedDeltaNet(const ModelConfig& config, nn::ParameterList& params);
  Tensor forward(const Tensor& hidden_states) const;

 private:
  struct Ordered;  // q, k, v, z, b, a as fix_query_key_value_ordering returns them
  Ordered fix_query_key_value_ordering(const Tensor& mixed_qkvz, const Tensor& mixed_ba) const;

  std::string path_ = "linear_attn";
  int64_t num_v_heads_, num_k_heads_, head_k_dim_, head_v_dim_, key_dim_, value_dim_;
  nn::HiddenAct activation_;
  nn::GdnBackend backend_;
  Tensor conv1d_weight_;  // conv1d.weight (2*Nk*Dk + Nv*Dv, 1, K), no bias
  nn::Linear in_proj_qkvz;  // H -> 2*Nk*Dk + 2*Nv*Dv, grouped per key head: [q, k, v, z]
  nn::Linear in_proj_ba;    // H -> 2*Nv, grouped per key head: [b, a]
  Tensor dt_bias_;          // (Nv)
  Tensor A_log_;            // (Nv)
  nn::RMSNormGated norm;    // over Dv
  nn::Linear out_proj;      // Nv*Dv -> H
};

class Qwen3NextDecoderLayer final : public DecoderLayer {
 public:
  Qwen3NextDecoderLayer(const ModelConfig& config, int64_t layer_idx);
  nn::PositionEmbeddings embed_positions(const Tensor& hidden) const override { return rotary_emb.forward(hidden); }
  Tensor forward(const Tensor& hidden_states, const nn::PositionEmbeddings& positions) const override;
  int64_t final_norm_parameters() const override { return hidden_size_; }
  bool has_recurrence() const override { return linear_attn.has_value(); }

  std::vector<Tensor> registered_buffers() const override { return mlp->buffers(); }

 private:
  int64_t hidden_size_;
  std::optional<Qwen3NextGatedDeltaNet> linear_attn;  // linear_attention layers
  std::optional<nn::Qwen3NextAttention> self_attn;    // full_attention layers (nn/gated_attention.h)
  std::unique_ptr<nn::FeedForward> mlp;  // Qwen3NextSparseMoeBlock where the config makes the layer sparse, else Qwen3NextMLP
  nn::GemmaRMSNorm input_layernorm;
  nn::GemmaRMSNorm post_attention_layernorm;
  nn::RotaryEmbedding rotary_emb;
};

// The fields of a hybrid stack with gated delta nets (Qwen3-Next's, Qwen3.5's), the family's defaults
// for the attention sizes: linear heads and dims, conv kernel, partial rotary, layer_types.
Result<ModelConfig> read_gated_delta_net_config(const ConfigReader& reader, const Family& family,
                                                const LlamaLikeDefaults& defaults);
// The gated attention's sizes, as a config states them.
nn::AttentionSizes attention_sizes(const ModelConfig& config);
std::unique_ptr<nn::Norm> build_qwen3_next_final_norm(const ModelConfig& config, nn::ParameterList& params);

}  // namespace census
