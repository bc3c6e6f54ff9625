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

std::unique_ptr<nn::FeedForward> build_group_limited_mlp(const ModelConfig& c, int64_t index, nn::ParameterList& params,
                                                        std::optional<DType> correction_bias_dtype) {
  if (!is_moe_layer(c, index)) return build_dense_mlp(c, index, params);
  nn::GroupLimitedRouting routing = group_limited_routing(c.moe);
  routing.correction_bias_dtype = correction_bias_dtype;
  return std::make_unique<nn::DeepseekV3MoE>(
      "mlp", routing,
      nn::DeepseekV3MoE::Sizes{c.hidden_size, c.moe.moe_intermediate_size,
                               c.moe.moe_intermediate_size * c.moe.n_shared_experts, c.hidden_act,
                               c.moe.experts_implementation, c.moe.expert_parallel},
      params);
}

std::unique_ptr<nn::FeedForward> DeepseekV3DecoderLayer::build_deepseek_v3_mlp(const ModelConfig& c, int64_t index,
                                                                            nn::ParameterList& params) {
  return build_group_limited_mlp(c, index, params, std::nullopt);  // the model's default dtype
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

Status read_group_limited_moe(const ConfigReader& r, const GroupLimitedMoeDefaults& d, ModelConfig& c) {
  MoeConfig& moe = c.moe;
  CENSUS_TRY(read_routed_experts(r, "n_routed_experts", "num_local_experts", d.n_routed_experts, d.num_experts_per_tok, moe));
  CENSUS_ASSIGN(const int64_t width, r.size("moe_intermediate_size", d.moe_intermediate_size));
  CENSUS_ASSIGN(const int64_t shared, r.size("n_shared_experts", d.n_shared_experts));
  CENSUS_ASSIGN(const int64_t dense, r.count("first_k_dense_replace", d.first_k_dense_replace));
  CENSUS_ASSIGN(const int64_t groups, r.size("n_group", d.n_group));
  CENSUS_ASSIGN(const int64_t top_groups, r.size("topk_group", d.topk_group));
  CENSUS_ASSIGN(const double scaling, r.positive_number("routed_scaling_factor", d.routed_scaling_factor));
  CENSUS_ASSIGN(const bool norm, r.flag("norm_topk_prob", true));
  if (moe.num_experts % groups != 0)
    return refuse("n_group", std::to_string(groups) + " groups do not divide the " + std::to_string(moe.num_experts) +
                                 " routed experts; group-limited routing needs equal groups");
  if (moe.num_experts / groups < 2)
    return refuse("n_group", std::to_string(groups) + " groups of " + std::to_string(moe.num_experts / groups) +
                                 " expert leave no two experts to score a group by; use fewer groups");
  if (top_groups > groups)
    return refuse("topk_group", std::to_string(top_groups) + " exceeds the " + std::to_string(groups) +
                                    " groups (n_group); fix the config");
  if (moe.num_experts_per_tok > top_groups * (moe.num_experts / groups))
    return refuse("num_experts_per_tok", std::to_string(moe.num_experts_per_tok) + " exceeds the experts of the " +
                                             std::to_string(top_groups) + " groups a token may route to; fix the config");
  moe.moe_intermediate_size = width;
  moe.n_shared_experts = shared;
  moe.first_k_dense_replace = std::min(dense, c.num_hidden_layers);
  moe.n_group = groups;
  moe.topk_group = top_groups;
  moe.routed_scaling_factor = scaling;
  moe.norm_topk_prob = norm;
  return {};
}

Status read_mla_sizes(const ConfigReader& r, const nn::MlaSizes& d, ModelConfig& c) {
  MlaConfig& mla = c.mla;
  CENSUS_ASSIGN(mla.qk_rope_head_dim, r.size("qk_rope_head_dim", d.qk_rope_head_dim));
  // q_lora_rank: absent takes the default; null (stated) is a plain q_proj.
  const bool plain_q = r.json().contains("q_lora_rank") && r.json().at("q_lora_rank").is_null();
  CENSUS_ASSIGN(const int64_t q_rank, r.size("q_lora_rank", d.q_lora_rank));
  mla.q_lora_rank = plain_q ? 0 : q_rank;
  CENSUS_ASSIGN(mla.kv_lora_rank, r.size("kv_lora_rank", d.kv_lora_rank));
  CENSUS_ASSIGN(mla.qk_nope_head_dim, r.size("qk_nope_head_dim", d.qk_nope_head_dim));
  CENSUS_ASSIGN(mla.v_head_dim, r.size("v_head_dim", d.v_head_dim));
  CENSUS_ASSIGN(mla.rope_interleave, r.flag("rope_interleave", d.rope_interleave));
  CENSUS_ASSIGN(const bool attention_bias, r.flag("attention_bias", false));
  c.qkv_bias = c.o_bias = attention_bias;  // q_a_proj, kv_a_proj_with_mqa and o_proj
  return {};
}

Result<ModelConfig> read_deepseek_v3_config(const ConfigReader& r, const Family& family) {
  CENSUS_ASSIGN(const int64_t rope_dim, r.size("qk_rope_head_dim", 64));
  CENSUS_ASSIGN(ModelConfig c, read_llama_like(r, family, {129280, 7168, 18432, 61, 128, std::nullopt, rope_dim}));
  CENSUS_TRY(read_mla_sizes(r, {1536, 512, 128, 64, 128, true}, c));
  CENSUS_TRY(read_group_limited_moe(r, {256, 8, 2048, 1, 3, 8, 4, 2.5}, c));
  CENSUS_ASSIGN(c.num_mtp_layers, r.count("num_nextn_predict_layers", 1));
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
