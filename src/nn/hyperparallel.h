// File: hyperparallel.h
// HyperParallel's fused modules, which a recipe's train.yaml installs in place of Transformers' own
// (plan_overrides with replace_module), running torch_npu's kernels through the census's contracts
// (ops::npu_*). Mirrors hyper_parallel/components/modules/{rms_norm,gqa_attention,grouped_experts}.py.
// Each holds the parameters of the module it replaces, in its own layout: the counts are unchanged.
//
// Legend: B = batch (1), S = seq_length, H = hidden_size, Nh / Nkv = heads / key-value heads,
// D = head_dim, g = Nh / Nkv, T = tokens, E = experts, K = experts per token, I = an expert's width.
#pragma once

#include <optional>

#include "nn/linear.h"
#include "nn/moe.h"
#include "nn/rms_norm.h"
#include "nn/rotary.h"

namespace census::nn {

// RMSNorm (replace_*_rms_norm): torch_npu.npu_rms_norm(x, w, eps)[0].
//   saves x, the weight and the fp32 reciprocal RMS (..., 1): 4 bytes a row where Transformers' norm
//   keeps an fp32 copy of x and a bf16 copy of the normalized rows.
class FusedRMSNorm final : public Norm {
 public:
  FusedRMSNorm(std::string path, int64_t dim, ParameterList& params);
  Tensor forward(const Tensor& hidden_states) const override;

 private:
  std::string path_;
  Tensor weight_;  // (D)
};

// GQAAttention with Qwen3-MoE's attention interface (replace_qwen3_moe_flash_attention): one fused
// linear_qkv grouped per key-value head ((g + 2) D a head); q reshaped out of its group (a copy);
// Transformers' own q/k norms, if the source had them; rotary by npu_rotary_mul on clones of q and k;
// npu_fusion_attention in BNSD with K/V not expanded; its output made contiguous in BSND; o_proj.
//   saves: the norm's output (by linear_qkv), the q/k norms' saves, the rotary clones and cos/sin,
//   the kernel's q, k, v (v a view of linear_qkv's output, which it keeps whole), out and statistics,
//   and the BSND output (by o_proj).
class GQAAttention {
 public:
  GQAAttention(int64_t hidden_size, int64_t num_heads, int64_t num_kv_heads, int64_t head_dim, bool qkv_bias,
               bool o_bias, bool qk_norm, double rms_norm_eps, ParameterList& params);
  Tensor forward(const Tensor& hidden_states, const PositionEmbeddings& positions) const;

 private:
  std::string path_ = "self_attn";
  int64_t num_heads_, num_kv_heads_, head_dim_;
  Linear linear_qkv;  // H -> Nkv * (g + 2) D
  Linear o_proj;      // Nh D -> H
  std::optional<LlamaRMSNorm> q_norm;
  std::optional<LlamaRMSNorm> k_norm;
};

// GroupedExperts (replace_*_grouped_experts), behind Transformers' Experts interface: tokens permuted
// by expert (npu_moe_token_permute); token counts by histc, their running sum the int64 group_list;
// GMMFunction up, npu_swiglu, GMMFunction down; npu_moe_token_unpermute weighting by the router's
// weights. The weights are stored as the kernel takes them: gate_up_proj (E, H, 2I), down_proj (E, I, H).
//   saves: the tokens (T, H), their experts (T, K) and order (S) int32 (permute); the permuted tokens
//   (S, H) and the swiglu output (S, I) (the two GMMs, with group_list); the up projection (S, 2I)
//   (swiglu); the experts' output (S, H) and the weights (T, K) (unpermute).
class GroupedExperts final : public MoeExperts {
 public:
  GroupedExperts(std::string path, int64_t num_experts, int64_t hidden_size, int64_t intermediate_size,
                 ParameterList& params);
  Tensor forward(const Tensor& hidden_states, const Tensor& top_k_index, const Tensor& top_k_weights) const override;

 private:
  std::string path_;
  int64_t num_experts_;
  Tensor gate_up_proj_;  // (E, H, 2I)
  Tensor down_proj_;     // (E, I, H)
  // The module keeps its last token counts and group list as attributes, alive until its next forward
  // (so the selective census's kept bytes are not read off a plain forward here: census_layer).
  mutable Tensor tokens_per_expert_gmm_;
  mutable Tensor group_list_;
};

}  // namespace census::nn
