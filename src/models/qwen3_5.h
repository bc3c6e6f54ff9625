// File: qwen3_5.h
// Qwen3.5's text decoder layers (transformers/models/qwen3_5/modeling_qwen3_5.py, Transformers 5;
// model_type qwen3_5_text, a Qwen3.5 config's text_config). Qwen3-Next's hybrid stack (qwen3_next.h)
// with two differences the census sees: the gated delta net projects q/k/v, z, b and a with four
// separate Linears, so nothing is regrouped by copying and the conv reads the q/k/v projection itself;
// and every feed-forward is the dense MLP. Its attention is Qwen3-Next's gated attention; its rotary
// embeds a text position on three interleaved grids, which changes cos and sin's values, not their shape.
//
// Legend as in qwen3_next.h; W = 2*Nk*Dk + Nv*Dv, the conv's channels.
#pragma once

#include <optional>

#include "models/qwen3_next.h"

namespace census {

class Qwen3_5GatedDeltaNet {
 public:
  Qwen3_5GatedDeltaNet(const ModelConfig& config, nn::ParameterList& params);
  Tensor forward(const Tensor& hidden_states) const;

 private:
  std::string path_ = "linear_attn";
  int64_t num_v_heads_, num_k_heads_, head_k_dim_, head_v_dim_, key_dim_, value_dim_;
  nn::HiddenAct activation_;
  nn::GdnBackend backend_;
  Tensor conv1d_weight_;  // conv1d.weight (W, 1, K), no bias
  Tensor dt_bias_;        // (Nv)
  Tensor A_log_;          // (Nv)
  nn::RMSNormGated norm;  // over Dv
  nn::Linear out_proj;    // Nv*Dv -> H
  nn::Linear in_proj_qkv;  // H -> W
  nn::Linear in_proj_z;    // H -> Nv*Dv
  nn::Linear in_proj_b;    // H -> Nv
  nn::Linear in_proj_a;    // H -> Nv
};

class Qwen3_5DecoderLayer final : public DecoderLayer {
 public:
  Qwen3_5DecoderLayer(const ModelConfig& config, int64_t layer_idx);
  nn::PositionEmbeddings embed_positions(const Tensor& hidden) const override { return rotary_emb.forward(hidden); }
  Tensor forward(const Tensor& hidden_states, const nn::PositionEmbeddings& positions) const override;
  int64_t final_norm_parameters() const override { return hidden_size_; }
  bool has_recurrence() const override { return linear_attn.has_value(); }

  std::vector<Tensor> registered_buffers() const override { return mlp->buffers(); }

 private:
  int64_t hidden_size_;
  std::optional<Qwen3_5GatedDeltaNet> linear_attn;  // linear_attention layers
  std::optional<nn::Qwen3NextAttention> self_attn;      // full_attention layers: Qwen3_5Attention is its copy
  std::unique_ptr<nn::FeedForward> mlp;  // Qwen3_5MLP, or Qwen3_5MoeSparseMoeBlock (qwen3_5_moe_text)
  nn::GemmaRMSNorm input_layernorm;                 // Qwen3_5RMSNorm, (1 + w)
  nn::GemmaRMSNorm post_attention_layernorm;
  nn::RotaryEmbedding rotary_emb;
};

Result<ModelConfig> read_qwen3_5_text(const ConfigReader& reader, const Family& family);
// Qwen3_5MoeTextConfig: the same layers with a MoE block on every one.
Result<ModelConfig> read_qwen3_5_moe_text(const ConfigReader& reader, const Family& family);
std::unique_ptr<DecoderLayer> build_qwen3_5_layer(const ModelConfig& config, int64_t index);

}  // namespace census
