// File: deepseek_v32.h
// DeepSeek-V3.2's attention (DeepseekV32Attention, transformers/models/deepseek_v32/modeling_deepseek_v32.py,
// Transformers 5), which GLM-5 copies: DeepSeek-V3's multi-head latent attention with the Lightning
// indexer (nn/lightning_indexer.h) choosing each query's top-k keys. Under a flash kernel the top-k
// indices go to the kernel as `indices`, which the census's flash contract (as the reference's) does
// not take: the attention is priced dense, and the indexer's cost is what it allocates and runs.
//
// Legend: S = seq_length, H = hidden_size, N = heads, Rq = q_lora_rank, Rkv = kv_lora_rank,
// Dn = qk_nope_head_dim, Dr = qk_rope_head_dim, Dv = v_head_dim, Dqk = Dn + Dr.
#pragma once

#include <optional>

#include "models/config.h"
#include "nn/attention_kernel.h"
#include "nn/lightning_indexer.h"
#include "nn/linear.h"
#include "nn/rms_norm.h"

namespace census {

class DeepseekV32Attention {
 public:
  // `indexer`: false for a layer that reuses an earlier layer's top-k (GLM-5's "shared" layers).
  DeepseekV32Attention(const ModelConfig& config, bool indexer, bool indexer_rope_interleave,
                       nn::ParameterList& params);
  // The attention's output, and the top-k indices its indexer chose (or `topk_indices`, an earlier
  // layer's, where it has none).
  std::pair<Tensor, Tensor> forward(const Tensor& hidden_states, const nn::PositionEmbeddings& positions,
                                    const Tensor& topk_indices = Tensor()) const;

 private:
  std::pair<Tensor, Tensor> expand_kv(const Tensor& kv_nope, const Tensor& k_rot) const;

  std::string path_ = "self_attn";
  nn::KernelProfile kernels_;
  nn::MlaSizes mla_;
  nn::Linear q_a_proj;  // H -> Rq
  nn::LlamaRMSNorm q_a_layernorm;
  nn::Linear q_b_proj;  // Rq -> N*Dqk
  nn::Linear kv_a_proj_with_mqa;  // H -> Rkv + Dr
  nn::LlamaRMSNorm kv_a_layernorm;
  nn::Linear kv_b_proj;  // Rkv -> N*(Dn + Dv)
  nn::Linear o_proj;     // N*Dv -> H
  std::optional<nn::LightningIndexer> indexer;
};

// DeepseekV32MoE where mlp_layer_types makes layer `index` sparse (its router's correction bias a
// float32 buffer), else the dense MLP; GLM-5's GlmMoeDsaMoE is the same block.
std::unique_ptr<nn::FeedForward> build_deepseek_v32_mlp(const ModelConfig& config, int64_t index, nn::ParameterList& params);

// DeepseekV32Config on DeepseekV3Config's fields: the indexer's (index_n_heads, index_head_dim,
// index_topk) and mlp_layer_types, which names each layer's feed-forward ("dense" or "sparse").
Result<ModelConfig> read_deepseek_v32_config(const ConfigReader& reader, const Family& family);

}  // namespace census
