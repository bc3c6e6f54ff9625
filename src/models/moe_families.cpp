#include "models/moe_families.h"

#include "models/llama.h"

namespace census {

Status read_routed_experts(const ConfigReader& r, const char* experts_field, const char* experts_alias,
                           int64_t default_experts, int64_t default_top_k, MoeConfig& moe) {
  const char* field = r.has(experts_field) || !r.has(experts_alias) ? experts_field : experts_alias;
  auto experts = r.count(field, default_experts);
  CENSUS_TRY(experts);
  if (*experts == 0)
    return refuse(field, "is 0: a mixture of experts needs at least one expert; for a dense model use its dense model_type");
  auto top_k = r.size("num_experts_per_tok", default_top_k);
  CENSUS_TRY(top_k);
  if (*top_k > *experts)
    return refuse("num_experts_per_tok", std::to_string(*top_k) + " exceeds the " + std::to_string(*experts) +
                                             " experts (" + field + "); a token cannot pick more experts than there are");
  // A config object a trainer set up carries Transformers' _experts_implementation; the census's
  // default is the reference's, grouped_mm.
  auto implementation = r.text("_experts_implementation", "grouped_mm");
  CENSUS_TRY(implementation);
  if (*implementation != "grouped_mm" && *implementation != "eager")
    return refuse("_experts_implementation", "'" + *implementation + "' is not priced; use grouped_mm or eager");
  moe.num_experts = *experts;
  moe.num_experts_per_tok = *top_k;
  moe.experts_implementation =
      *implementation == "eager" ? nn::ExpertsImplementation::kEager : nn::ExpertsImplementation::kGroupedMm;
  return {};
}

Status read_qwen_sparse_layers(const ConfigReader& r, ModelConfig& c, int64_t default_moe_width,
                               bool default_norm_topk_prob) {
  auto step = r.size("decoder_sparse_step", 1);
  CENSUS_TRY(step);
  auto dense_layers = r.layer_indices("mlp_only_layers", c.num_hidden_layers);
  CENSUS_TRY(dense_layers);
  auto width = r.size("moe_intermediate_size", default_moe_width);
  CENSUS_TRY(width);
  auto norm = r.flag("norm_topk_prob", default_norm_topk_prob);
  CENSUS_TRY(norm);
  c.moe.decoder_sparse_step = *step;
  c.moe.mlp_only_layers = std::move(*dense_layers);
  c.moe.moe_intermediate_size = *width;
  c.moe.norm_topk_prob = *norm;
  return {};
}

// Qwen2MoeConfig: q, k, v biased by qkv_bias (default true), o not; a sigmoid-gated shared expert.
Result<ModelConfig> read_qwen2_moe(const ConfigReader& r, const Family& family) {
  auto c = read_llama_like(r, family, {151936, 2048, 5632, 24, 16, 16, std::nullopt});
  CENSUS_TRY(c);
  auto qkv_bias = r.flag("qkv_bias", true);
  CENSUS_TRY(qkv_bias);
  c->qkv_bias = *qkv_bias;
  c->moe.block = MoeConfig::Block::kQwen2Moe;
  CENSUS_TRY(read_routed_experts(r, "num_experts", "num_local_experts", 60, 4, c->moe));
  CENSUS_TRY(read_qwen_sparse_layers(r, *c, 1408, false));
  auto shared = r.size("shared_expert_intermediate_size", 5632);
  CENSUS_TRY(shared);
  c->moe.shared_expert_intermediate_size = *shared;
  CENSUS_TRY(read_stated_layer_types(r, *c));
  return c;
}

// Qwen3MoeConfig: Qwen3's attention (per-head q/k norms; head_dim not a field, so hidden/heads unless
// stated), attention_bias for q, k, v and o.
Result<ModelConfig> read_qwen3_moe(const ConfigReader& r, const Family& family) {
  auto c = read_llama_like(r, family, {151936, 2048, 6144, 24, 32, 4, std::nullopt});
  CENSUS_TRY(c);
  auto attention_bias = r.flag("attention_bias", false);
  CENSUS_TRY(attention_bias);
  c->qkv_bias = c->o_bias = *attention_bias;
  c->qk_norm = true;
  c->moe.block = MoeConfig::Block::kQwen3Moe;
  CENSUS_TRY(read_routed_experts(r, "num_experts", "num_local_experts", 128, 8, c->moe));
  CENSUS_TRY(read_qwen_sparse_layers(r, *c, 768, false));
  CENSUS_TRY(read_stated_layer_types(r, *c));
  return c;
}

// MixtralConfig: every layer MoE, experts as wide as intermediate_size, rms_norm_eps 1e-5.
Result<ModelConfig> read_mixtral(const ConfigReader& r, const Family& family) {
  auto c = read_llama_like(r, family, {32000, 4096, 14336, 32, 32, 8, std::nullopt});
  CENSUS_TRY(c);
  auto eps = r.positive_number("rms_norm_eps", 1e-5);
  CENSUS_TRY(eps);
  c->rms_norm_eps = *eps;
  // Training with jitter multiplies the router's input by noise in place, which the census does not price.
  if (r.has("router_jitter_noise") &&
      (!r.json().at("router_jitter_noise").is_number() || r.json().at("router_jitter_noise").get<double>() != 0.0))
    return refuse("router_jitter_noise", "is set; the census prices Mixtral's router without jitter (0.0)");
  c->moe.block = MoeConfig::Block::kMixtral;
  CENSUS_TRY(read_routed_experts(r, "num_local_experts", "num_experts", 8, 2, c->moe));
  c->moe.norm_topk_prob = true;
  return c;
}

}  // namespace census
