// File: deepseek_v3.h
// DeepSeek-V3's decoder layer (transformers/models/deepseek_v3/modeling_deepseek_v3.py, Transformers 5):
// multi-head latent attention, and a dense MLP on the first first_k_dense_replace layers, a MoE block
// (group-limited sigmoid router, routed experts, shared experts) on the rest.
//
// Legend: S = seq_length, H = hidden_size, N = heads, Rq = q_lora_rank, Rkv = kv_lora_rank,
// Dn = qk_nope_head_dim, Dr = qk_rope_head_dim, Dv = v_head_dim, Dqk = Dn + Dr, T = tokens,
// E = routed experts, G = n_group, K = experts per token.
#pragma once

#include <optional>

#include "models/config.h"
#include "models/config_reader.h"
#include "nn/attention_kernel.h"
#include "nn/linear.h"
#include "nn/moe.h"
#include "nn/rms_norm.h"
#include "nn/rotary.h"

namespace census {

// Multi-head latent attention. Queries through a low-rank q_a/q_b pair (or a plain q_proj); keys and
// values from one compressed latent (Rkv) expanded per head by kv_b_proj, plus one rotary key part
// (Dr) shared by all heads; the rotary applied to the Dr part only; values Dv wide.
//   saves: the projections' inputs; the norms' fp32 copies; the rotary's cos/sin; the flash kernel's
//   q (N, S, Dqk), the assembled k (N, S, Dqk), v (a view of kv_b_proj's output), out and statistics.
class DeepseekV3Attention {
 public:
  DeepseekV3Attention(const ModelConfig& config, nn::ParameterList& params);
  Tensor forward(const Tensor& hidden_states, const nn::PositionEmbeddings& positions) const;

 private:
  // kv_b_proj's per-head keys and values, and the keys assembled from them and the rotary part.
  std::pair<Tensor, Tensor> expand_kv(const Tensor& kv_nope, const Tensor& k_rot) const;

  std::string path_ = "self_attn";
  nn::KernelProfile kernels_;  // whose flash contract the attention runs
  MlaConfig mla_;
  std::optional<nn::Linear> q_proj;  // H -> N*Dqk, where q_lora_rank is null
  std::optional<nn::Linear> q_a_proj;  // H -> Rq
  std::optional<nn::LlamaRMSNorm> q_a_layernorm;
  std::optional<nn::Linear> q_b_proj;  // Rq -> N*Dqk
  nn::Linear kv_a_proj_with_mqa;       // H -> Rkv + Dr
  nn::LlamaRMSNorm kv_a_layernorm;
  nn::Linear kv_b_proj;  // Rkv -> N*(Dn + Dv)
  nn::Linear o_proj;     // N*Dv -> H
};

// DeepseekV3TopkRouter, in fp32 throughout: sigmoid scores; the top G' of G groups (each scored by
// its two best experts, e_score_correction_bias added) bound the top-K choice; the chosen scores,
// renormalized and scaled by routed_scaling_factor, are the fp32 weights.
//   saves: fp32 copies of x (T, H) and of the weight (E, H); the scores (T, E); the indices;
//   a clone of the gathered weights (T, K) and their denominator (T, 1).
class DeepseekV3TopkRouter {
 public:
  DeepseekV3TopkRouter(const ModelConfig& config, nn::ParameterList& params);
  nn::Routing forward(const Tensor& hidden_states) const;

 private:
  std::string path_ = "mlp.gate";
  MoeConfig moe_;
  Tensor weight_;                   // (E, H)
  Tensor e_score_correction_bias_;  // (E), a buffer
};

class DeepseekV3MoE final : public nn::FeedForward {
 public:
  DeepseekV3MoE(const ModelConfig& config, nn::ParameterList& params);
  Tensor forward(const Tensor& hidden_states) const override;

 private:
  std::string path_ = "mlp";
  nn::Experts experts;
  DeepseekV3TopkRouter gate;
  nn::GatedMLP shared_experts;  // moe_intermediate_size * n_shared_experts wide
};

class DeepseekV3DecoderLayer final : public DecoderLayer {
 public:
  DeepseekV3DecoderLayer(const ModelConfig& config, int64_t index);
  nn::PositionEmbeddings embed_positions(const Tensor& hidden) const override { return rotary_emb.forward(hidden); }
  Tensor forward(const Tensor& hidden_states, const nn::PositionEmbeddings& positions) const override;
  int64_t final_norm_parameters() const override { return hidden_size_; }

 private:
  int64_t hidden_size_;
  DeepseekV3Attention self_attn;
  std::unique_ptr<nn::FeedForward> mlp;
  nn::LlamaRMSNorm input_layernorm;
  nn::LlamaRMSNorm post_attention_layernorm;
  nn::RotaryEmbedding rotary_emb;  // Dr wide
};

Result<ModelConfig> read_deepseek_v3(const ConfigReader& reader, const Family& family);
std::unique_ptr<DecoderLayer> build_deepseek_v3_layer(const ModelConfig& config, int64_t index);

}  // namespace census
