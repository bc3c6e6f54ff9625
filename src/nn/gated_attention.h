// File: gated_attention.h
// The gated full attention of Qwen3-Next (Qwen3NextAttention, transformers/models/qwen3_next/
// modeling_qwen3_next.py, Transformers 5), which Qwen3.5's Qwen3_5Attention copies: q_proj doubled
// for an output gate, per-head (1 + w) q/k norms, partial rotary, flash attention, the output times
// sigmoid(gate), o_proj.
//
// Legend: S = seq_length, H = hidden_size, N = heads, Nkv = key/value heads, D = head_dim.
#pragma once

#include "nn/attention_kernel.h"
#include "nn/linear.h"
#include "nn/rms_norm.h"
#include "nn/rotary.h"

namespace census::nn {

// The sizes of a grouped-query attention.
struct AttentionSizes {
  int64_t hidden_size;
  int64_t num_attention_heads;
  int64_t num_key_value_heads;
  int64_t head_dim;
  bool qkv_bias;
  bool o_bias;
  double rms_norm_eps;
};

class Qwen3NextAttention {
 public:
  Qwen3NextAttention(const AttentionSizes& sizes, KernelProfile kernels, ParameterList& params);
  Tensor forward(const Tensor& hidden_states, const PositionEmbeddings& positions) const;

 private:
  std::string path_ = "self_attn";
  KernelProfile kernels_;  // whose flash contract the attention runs
  int64_t head_dim_;
  Linear q_proj;  // H -> 2*N*D: per head, the query then its gate
  Linear k_proj;
  Linear v_proj;
  Linear o_proj;
  GemmaRMSNorm q_norm;  // Qwen3NextRMSNorm, (1 + w), over D
  GemmaRMSNorm k_norm;
};

}  // namespace census::nn
