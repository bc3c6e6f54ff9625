// GLM-4.7-Flash (transformers/models/glm4_moe_lite/modeling_glm4_moe_lite.py, Transformers 5):
// DeepSeek-V3's layer (models/deepseek_v3.h) with GLM's MoE: multi-head latent attention, a dense
// MLP on the layers mlp_layer_types calls "dense" and, on the "sparse" ones, Glm4MoeLiteMoE (the
// group-limited sigmoid router with its correction bias made in fp32, routed and shared experts).
#include "models/deepseek_v3.h"

namespace census {
namespace {

Result<ModelConfig> read_glm4_moe_lite(const ConfigReader& r);

std::unique_ptr<nn::FeedForward> build_glm4_moe_lite_mlp(const ModelConfig& c, int64_t index,
                                                         nn::ParameterList& params) {
  return build_group_limited_mlp(c, index, params, DType::kFloat32);
}

std::unique_ptr<DecoderLayer> build_glm4_moe_lite_layer(const ModelConfig& config, int64_t index) {
  return std::make_unique<DeepseekV3DecoderLayer>(config, index, build_glm4_moe_lite_mlp);
}

}  // namespace

CENSUS_FAMILY(kGlm4MoeLiteFamily) = {"glm4_moe_lite", read_glm4_moe_lite, build_glm4_moe_lite_layer,
                                     build_llama_final_norm};

namespace {

// mlp_layer_types: "dense" or "sparse" per layer, as stated; by default the first layer dense and
// the rest sparse. Stated, its dense layers are listed as mlp_only_layers.
Status read_mlp_layer_types(const ConfigReader& r, ModelConfig& c) {
  c.moe.first_k_dense_replace = std::min<int64_t>(1, c.num_hidden_layers);
  if (!r.has("mlp_layer_types")) return {};
  CENSUS_ASSIGN(const std::vector<std::string> types,
                r.layer_kinds("mlp_layer_types", c.num_hidden_layers, {"dense", "sparse"}));
  c.moe.first_k_dense_replace = 0;
  c.moe.mlp_only_layers.clear();
  for (size_t i = 0; i < types.size(); ++i)
    if (types[i] == "dense") c.moe.mlp_only_layers.push_back(static_cast<int64_t>(i));
  return {};
}

// Glm4MoeLiteConfig: MLA with q_lora_rank 768, kv_lora_rank 512, nope 192, rope 64 (head_dim is its
// alias, the rotary's width), values 256; 64 routed experts of 1536, top 4, one shared expert, one
// group, scaled by 1.8. It has no MTP field; num_nextn_predict_layers, where a config states it,
// stacks MTP layers as DeepSeek-V3's do.
Result<ModelConfig> read_glm4_moe_lite(const ConfigReader& r) {
  const char* rope_field = r.has("qk_rope_head_dim") || !r.has("head_dim") ? "qk_rope_head_dim" : "head_dim";
  CENSUS_ASSIGN(const int64_t rope_dim, r.size(rope_field, 64));
  CENSUS_ASSIGN(ModelConfig c, read_llama_like(r, kGlm4MoeLiteFamily, {154880, 2048, 10240, 47, 20, 20, rope_dim}));
  c.head_dim = rope_dim;
  CENSUS_TRY(read_mla_sizes(r, {768, 512, 192, rope_dim, 256, true}, c));
  CENSUS_TRY(read_group_limited_moe(r, {64, 4, 1536, 1, 1, 1, 1, 1.8}, c));
  CENSUS_TRY(read_mlp_layer_types(r, c));
  CENSUS_ASSIGN(c.num_mtp_layers, r.count("num_nextn_predict_layers", 0));
  return c;
}

}  // namespace
}  // namespace census
