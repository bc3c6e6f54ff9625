// DeepSeek-V3 (transformers/models/deepseek_v3/modeling_deepseek_v3.py, Transformers 5): multi-head
// latent attention (nn/latent_attention.h), a dense MLP on the first first_k_dense_replace layers and
// DeepseekV3MoE (nn/deepseek_moe.h) on the rest; its MTP layer stacked last.
#include "models/deepseek_v3.h"

#include "models/llama.h"
#include "models/moe_layers.h"
#include "nn/pre_norm_layer.h"
#include "ops/ops.h"

namespace census {

nn::GroupLimitedRouting group_limited_routing(const MoeConfig& moe) {
  return {moe.num_experts, moe.num_experts_per_tok, moe.n_group, moe.topk_group, moe.norm_topk_prob,
          moe.routed_scaling_factor};
}

std::unique_ptr<nn::FeedForward> DeepseekV3DecoderLayer::build_deepseek_v3_mlp(const ModelConfig& c, int64_t index,
                                                                            nn::ParameterList& params) {
  if (!is_moe_layer(c, index)) return build_dense_mlp(c, index, params);
  return std::make_unique<nn::DeepseekV3MoE>(
      "mlp", group_limited_routing(c.moe),
      nn::DeepseekV3MoE::Sizes{c.hidden_size, c.moe.moe_intermediate_size,
                               c.moe.moe_intermediate_size * c.moe.n_shared_experts, c.hidden_act,
                               c.moe.experts_implementation},
      params);
}

DeepseekV3DecoderLayer::DeepseekV3DecoderLayer(const ModelConfig& c, int64_t index, FeedForwardBuilder build_mlp)
    : hidden_size_(c.hidden_size),
      self_attn(c.hidden_size, c.num_attention_heads, c.mla, c.qkv_bias, c.o_bias, c.kernels, parameters_),
      mlp(build_mlp(c, index, parameters_)),
      input_layernorm("input_layernorm", c.hidden_size, c.rms_norm_eps, parameters_),
      post_attention_layernorm("post_attention_layernorm", c.hidden_size, c.rms_norm_eps, parameters_),
      rotary_emb(c.mla.qk_rope_head_dim) {}

Tensor DeepseekV3DecoderLayer::forward(const Tensor& input, const nn::PositionEmbeddings& positions) const {
  return nn::pre_norm_layer_forward(
      input, input_layernorm, [&](const Tensor& normed) { return self_attn.forward(normed, positions); }, post_attention_layernorm, *mlp);
}

Result<ModelConfig> read_deepseek_v3_config(const ConfigReader& r, const Family& family) {
  auto rope_dim = r.size("qk_rope_head_dim", 64);
  CENSUS_TRY(rope_dim);
  auto c = read_llama_like(r, family, {129280, 7168, 18432, 61, 128, std::nullopt, *rope_dim});
  CENSUS_TRY(c);
  MlaConfig& mla = c->mla;
  mla.qk_rope_head_dim = *rope_dim;
  // q_lora_rank: absent takes the default; null (stated) is a plain q_proj.
  const bool plain_q = r.json().contains("q_lora_rank") && r.json().at("q_lora_rank").is_null();
  auto q_rank = r.size("q_lora_rank", 1536);
  CENSUS_TRY(q_rank);
  mla.q_lora_rank = plain_q ? 0 : *q_rank;
  auto kv_rank = r.size("kv_lora_rank", 512);
  CENSUS_TRY(kv_rank);
  auto nope_dim = r.size("qk_nope_head_dim", 128);
  CENSUS_TRY(nope_dim);
  auto v_dim = r.size("v_head_dim", 128);
  CENSUS_TRY(v_dim);
  auto interleave = r.flag("rope_interleave", true);
  CENSUS_TRY(interleave);
  mla.kv_lora_rank = *kv_rank;
  mla.qk_nope_head_dim = *nope_dim;
  mla.v_head_dim = *v_dim;
  mla.rope_interleave = *interleave;
  auto attention_bias = r.flag("attention_bias", false);
  CENSUS_TRY(attention_bias);
  c->qkv_bias = c->o_bias = *attention_bias;  // q_a_proj, kv_a_proj_with_mqa and o_proj

  MoeConfig& moe = c->moe;
  CENSUS_TRY(read_routed_experts(r, "n_routed_experts", "num_local_experts", 256, 8, moe));
  auto width = r.size("moe_intermediate_size", 2048);
  CENSUS_TRY(width);
  auto shared = r.size("n_shared_experts", 1);
  CENSUS_TRY(shared);
  auto dense = r.count("first_k_dense_replace", 3);
  CENSUS_TRY(dense);
  auto groups = r.size("n_group", 8);
  CENSUS_TRY(groups);
  auto top_groups = r.size("topk_group", 4);
  CENSUS_TRY(top_groups);
  auto scaling = r.positive_number("routed_scaling_factor", 2.5);
  CENSUS_TRY(scaling);
  auto norm = r.flag("norm_topk_prob", true);
  CENSUS_TRY(norm);
  auto mtp = r.count("num_nextn_predict_layers", 1);
  CENSUS_TRY(mtp);
  if (moe.num_experts % *groups != 0)
    return refuse("n_group", std::to_string(*groups) + " groups do not divide the " + std::to_string(moe.num_experts) +
                                 " routed experts; group-limited routing needs equal groups");
  if (moe.num_experts / *groups < 2)
    return refuse("n_group", std::to_string(*groups) + " groups of " + std::to_string(moe.num_experts / *groups) +
                                 " expert leave no two experts to score a group by; use fewer groups");
  if (*top_groups > *groups)
    return refuse("topk_group", std::to_string(*top_groups) + " exceeds the " + std::to_string(*groups) +
                                    " groups (n_group); fix the config");
  if (moe.num_experts_per_tok > *top_groups * (moe.num_experts / *groups))
    return refuse("num_experts_per_tok", std::to_string(moe.num_experts_per_tok) + " exceeds the experts of the " +
                                             std::to_string(*top_groups) + " groups a token may route to; fix the config");
  moe.moe_intermediate_size = *width;
  moe.n_shared_experts = *shared;
  moe.first_k_dense_replace = std::min(*dense, c->num_hidden_layers);
  moe.n_group = *groups;
  moe.topk_group = *top_groups;
  moe.routed_scaling_factor = *scaling;
  moe.norm_topk_prob = *norm;
  c->num_mtp_layers = *mtp;
  return c;
}

namespace {

Result<ModelConfig> read_deepseek_v3(const ConfigReader& r);

std::unique_ptr<DecoderLayer> build_deepseek_v3_layer(const ModelConfig& config, int64_t index) {
  return std::make_unique<DeepseekV3DecoderLayer>(config, index);
}

}  // namespace

CENSUS_FAMILY(kDeepseekV3Family) = {"deepseek_v3", read_deepseek_v3, build_deepseek_v3_layer, build_llama_final_norm};

namespace {

Result<ModelConfig> read_deepseek_v3(const ConfigReader& r) { return read_deepseek_v3_config(r, kDeepseekV3Family); }

}  // namespace

}  // namespace census
