// Qwen2-MoE (transformers/models/qwen2_moe/modeling_qwen2_moe.py, Transformers 5): Qwen2's attention
// (q, k, v biased by qkv_bias) and, on its sparse layers, a softmax top-k router, the routed experts and
// a sigmoid-gated shared expert (nn/sparse_moe_block.h).
#include "models/qwen2_moe.h"

#include "models/llama.h"
#include "models/moe_layers.h"
#include "nn/sparse_moe_block.h"

namespace census {

Status read_qwen_sparse_layers(const ConfigReader& r, ModelConfig& c, int64_t default_moe_width,
                               bool default_norm_topk_prob) {
  CENSUS_ASSIGN(c.moe.decoder_sparse_step, r.size("decoder_sparse_step", 1));
  CENSUS_ASSIGN(c.moe.mlp_only_layers, r.layer_indices("mlp_only_layers", c.num_hidden_layers));
  CENSUS_ASSIGN(c.moe.moe_intermediate_size, r.size("moe_intermediate_size", default_moe_width));
  CENSUS_ASSIGN(c.moe.norm_topk_prob, r.flag("norm_topk_prob", default_norm_topk_prob));
  return {};
}

std::unique_ptr<nn::FeedForward> build_qwen2_moe_mlp(const ModelConfig& c, int64_t index, nn::ParameterList& params) {
  if (!is_moe_layer(c, index)) return build_dense_mlp(c, index, params);
  nn::TopKRouter gate = make_topk_router(c, {c.moe.norm_topk_prob, /*weights_in_logits_dtype=*/true}, params);
  return std::make_unique<nn::SparseMoeBlock>(
      "mlp", std::move(gate), make_routed_experts(c, index, c.moe.moe_intermediate_size, params),
      nn::SharedExpert{c.moe.shared_expert_intermediate_size, c.hidden_act}, c.hidden_size, params);
}

namespace {

Result<ModelConfig> read_qwen2_moe(const ConfigReader& r);

std::unique_ptr<DecoderLayer> build_qwen2_moe_layer(const ModelConfig& config, int64_t index) {
  return std::make_unique<LlamaDecoderLayer>(config, index, build_qwen2_moe_mlp);
}

}  // namespace

CENSUS_FAMILY(kQwen2MoeFamily) = {"qwen2_moe", read_qwen2_moe, build_qwen2_moe_layer, build_llama_final_norm,
                                  "Qwen2Moe"};

namespace {

// Qwen2MoeConfig: q, k, v biased by qkv_bias (default true), o not; a sigmoid-gated shared expert.
Result<ModelConfig> read_qwen2_moe(const ConfigReader& r) {
  CENSUS_ASSIGN(ModelConfig c, read_llama_like(r, kQwen2MoeFamily, {151936, 2048, 5632, 24, 16, 16, std::nullopt}));
  CENSUS_ASSIGN(c.qkv_bias, r.flag("qkv_bias", true));
  CENSUS_TRY(read_routed_experts(r, "num_experts", "num_local_experts", 60, 4, c.moe));
  CENSUS_TRY(read_qwen_sparse_layers(r, c, 1408, false));
  CENSUS_ASSIGN(c.moe.shared_expert_intermediate_size, r.size("shared_expert_intermediate_size", 5632));
  CENSUS_TRY(read_stated_layer_types(r, c));
  return c;
}

}  // namespace
}  // namespace census
