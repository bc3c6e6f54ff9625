// File: latent_attention.h
// Multi-head latent attention (DeepseekV3Attention, transformers/models/deepseek_v3/modeling_deepseek_v3.py,
// Transformers 5), which every MLA family copies (GLM-4.7-Flash's Glm4MoeLiteAttention, Kimi K2).
// Queries through a low-rank q_a/q_b pair (or a plain q_proj); keys and values from one compressed
// latent (Rkv) expanded per head by kv_b_proj, plus one rotary key part (Dr) shared by all heads; the
// rotary applied to the Dr part only; values Dv wide.
//   saves: the projections' inputs; the norms' fp32 copies; the rotary's cos/sin; the flash kernel's
//   q (N, S, Dqk), the assembled k (N, S, Dqk), v (a view of kv_b_proj's output), out and statistics.
//
// Legend: S = seq_length, H = hidden_size, N = heads, Rq = q_lora_rank, Rkv = kv_lora_rank,
// Dn = qk_nope_head_dim, Dr = qk_rope_head_dim, Dv = v_head_dim, Dqk = Dn + Dr.
#pragma once

#include <optional>

#include "nn/attention_kernel.h"
#include "nn/linear.h"
#include "nn/rms_norm.h"
#include "nn/rotary.h"

namespace census::nn {

struct MlaSizes {
  int64_t q_lora_rank = 0;  // 0: a plain q_proj
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
  bool rope_interleave = true;
};

class DeepseekV3Attention {
 public:
  DeepseekV3Attention(int64_t hidden_size, int64_t num_heads, const MlaSizes& mla, bool qkv_bias, bool o_bias,
                      KernelProfile kernels, ParameterList& params);
  Tensor forward(const Tensor& hidden_states, const PositionEmbeddings& positions) const;

 private:
  // kv_b_proj's per-head keys and values, and the keys assembled from them and the rotary part.
  std::pair<Tensor, Tensor> expand_kv(const Tensor& kv_nope, const Tensor& k_rot) const;

  std::string path_ = "self_attn";
  KernelProfile kernels_;  // whose flash contract the attention runs
  MlaSizes mla_;
  std::optional<Linear> q_proj;  // H -> N*Dqk, where q_lora_rank is null
  std::optional<Linear> q_a_proj;  // H -> Rq
  std::optional<LlamaRMSNorm> q_a_layernorm;
  std::optional<Linear> q_b_proj;  // Rq -> N*Dqk
  Linear kv_a_proj_with_mqa;       // H -> Rkv + Dr
  LlamaRMSNorm kv_a_layernorm;
  Linear kv_b_proj;  // Rkv -> N*(Dn + Dv)
  Linear o_proj;     // N*Dv -> H
};

}  // namespace census::nn
