// File: deepseek_v3.h
// DeepSeek-V3's decoder layer and config (transformers/models/deepseek_v3/modeling_deepseek_v3.py,
// Transformers 5), which the MLA families copy: multi-head latent attention, and a dense MLP on the
// first first_k_dense_replace layers, DeepseekV3MoE (group-limited sigmoid router, routed experts,
// shared experts) on the rest.
//
// Legend: S = seq_length, H = hidden_size, N = heads.
#pragma once

#include "models/config.h"
#include "models/llama.h"
#include "nn/deepseek_moe.h"
#include "nn/latent_attention.h"
#include "nn/rms_norm.h"
#include "nn/rotary.h"

namespace census {

class DeepseekV3DecoderLayer final : public DecoderLayer {
 public:
  DeepseekV3DecoderLayer(const ModelConfig& config, int64_t index, FeedForwardBuilder build_mlp);
  explicit DeepseekV3DecoderLayer(const ModelConfig& config, int64_t index)
      : DeepseekV3DecoderLayer(config, index, build_deepseek_v3_mlp) {}
  nn::PositionEmbeddings embed_positions(const Tensor& hidden) const override { return rotary_emb.forward(hidden); }
  Tensor forward(const Tensor& hidden_states, const nn::PositionEmbeddings& positions) const override;
  int64_t final_norm_parameters() const override { return hidden_size_; }

  // Layer `index`'s feed-forward: DeepseekV3MoE where the config makes it sparse, else the dense MLP.
  static std::unique_ptr<nn::FeedForward> build_deepseek_v3_mlp(const ModelConfig& config, int64_t index,
                                                                nn::ParameterList& params);

  std::vector<Tensor> registered_buffers() const override { return mlp->buffers(); }

 private:
  int64_t hidden_size_;
  nn::DeepseekV3Attention self_attn;
  std::unique_ptr<nn::FeedForward> mlp;
  nn::LlamaRMSNorm input_layernorm;
  nn::LlamaRMSNorm post_attention_layernorm;
  nn::RotaryEmbedding rotary_emb;  // Dr wide
};

// Layer `index`'s feed-forward in a group-limited MoE family: DeepseekV3MoE (its router's correction
// bias built in `correction_bias_dtype`, unset: the model's default dtype) where the config makes the
// layer sparse, else the dense MLP.
std::unique_ptr<nn::FeedForward> build_group_limited_mlp(const ModelConfig& config, int64_t index,
                                                        nn::ParameterList& params,
                                                        std::optional<DType> correction_bias_dtype);

// The routing fields of a DeepSeek-V3 MoE config, as the router takes them.
nn::GroupLimitedRouting group_limited_routing(const MoeConfig& moe);

// The defaults of a group-limited MoE config (DeepseekV3Config's, Glm4MoeConfig's).
struct GroupLimitedMoeDefaults {
  int64_t n_routed_experts;
  int64_t num_experts_per_tok;
  int64_t moe_intermediate_size;
  int64_t n_shared_experts;
  int64_t first_k_dense_replace;
  int64_t n_group;
  int64_t topk_group;
  double routed_scaling_factor;
};

// The routed experts (n_routed_experts, alias num_local_experts), their width, the shared experts,
// the dense layers before the first sparse one, and the group-limited routing (norm_topk_prob true by
// default), refusing groups no router can form.
Status read_group_limited_moe(const ConfigReader& reader, const GroupLimitedMoeDefaults& defaults, ModelConfig& config);

// The multi-head latent attention's sizes (q_lora_rank null for a plain q_proj) and attention_bias
// (q_a_proj, kv_a_proj_with_mqa and o_proj), with the family's defaults.
Status read_mla_sizes(const ConfigReader& reader, const nn::MlaSizes& defaults, ModelConfig& config);

// DeepseekV3Config: MLA sizes; q_lora_rank null for a plain q_proj; head_dim is qk_rope_head_dim (the
// rotary's width); n_routed_experts experts in n_group groups, of which topk_group bound the choice;
// the MTP layers (num_nextn_predict_layers). `family` is the reading family's (Kimi K2 reads it too).
Result<ModelConfig> read_deepseek_v3_config(const ConfigReader& reader, const Family& family);

}  // namespace census
