// File: lightning_indexer.h
// The Lightning indexer of DeepSeek Sparse Attention (DeepseekV32Indexer,
// transformers/models/deepseek_v32/modeling_deepseek_v32.py, Transformers 5; GLM-5's GlmMoeDsaIndexer
// copies it with interleaved rotary): per query, the top-k keys by a light multi-head score. It runs
// under torch.no_grad, so it saves nothing; what it allocates lives only while it runs.
//
//   q       = wq_b(q_resid).view(B, S, Hi, Di)            the attention's q_a_layernorm output
//   k       = k_norm(wk(x)).unsqueeze(2)                  LayerNorm with bias, (B, S, 1, Di)
//   q, k    = rotary on the first Dr channels, the rest passed through, concatenated back
//   scores  = relu(q.float() @ k^T.float() * Di^-0.5)     (B, S, Hi, S) fp32, one bmm
//   weights = weights_proj(x).float() * Hi^-0.5          (B, S, Hi) fp32
//   index   = (weights.unsqueeze(-2) @ scores).squeeze(-2), masked causally   (B, S, S) fp32, one bmm
//   returns index.topk(min(topk, S)).indices.to(int32)    (B, S, topk)
//
// Legend: S = seq_length, H = hidden_size, Rq = q_lora_rank, Hi = index_n_heads, Di = index_head_dim,
// Dr = qk_rope_head_dim.
#pragma once

#include "nn/linear.h"
#include "nn/rotary.h"

namespace census::nn {

struct IndexerSizes {
  int64_t hidden_size;
  int64_t q_lora_rank;
  int64_t n_heads;   // index_n_heads
  int64_t head_dim;  // index_head_dim
  int64_t qk_rope_head_dim;
  int64_t topk;      // index_topk
  bool rope_interleave = false;  // GLM-5's indexer rotates interleaved pairs, DeepSeek-V3.2's halves
};

class LightningIndexer {
 public:
  LightningIndexer(std::string path, const IndexerSizes& sizes, ParameterList& params);
  Tensor forward(const Tensor& hidden_states, const Tensor& q_resid, const PositionEmbeddings& positions) const;

 private:
  std::string path_;
  IndexerSizes sizes_;
  Linear wq_b;          // Rq -> Hi*Di
  Linear wk;            // H -> Di
  std::string k_norm_path_;
  Tensor k_norm_weight_;  // (Di), nn.LayerNorm(Di, eps=1e-6)
  Tensor k_norm_bias_;
  Linear weights_proj;  // H -> Hi
};

}  // namespace census::nn
