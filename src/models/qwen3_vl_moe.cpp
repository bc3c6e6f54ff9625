// Qwen3-VL-MoE's text tower (transformers/models/qwen3_vl_moe/modeling_qwen3_vl_moe.py, Transformers 5;
// model_type qwen3_vl_moe_text, under a qwen3_vl_moe config's text_config): Qwen3's attention (per-head
// q/k norms) and, on its sparse layers, Qwen3VLMoeTextSparseMoeBlock: the softmax top-k router, which
// always renormalizes its top-k values and casts them back to bf16, and the routed experts
// (nn/sparse_moe_block.h). Its rotary embeds a text token's position on three grids (mrope_section),
// which changes cos and sin's values, not their shape: the layer receives them as Qwen3's does.
#include "models/qwen3_vl.h"
#include "models/llama.h"
#include "models/moe_layers.h"
#include "models/qwen2_moe.h"
#include "nn/sparse_moe_block.h"

namespace census {
namespace {

Result<ModelConfig> read_qwen3_vl_moe_text(const ConfigReader& r);

std::unique_ptr<nn::FeedForward> build_qwen3_vl_moe_mlp(const ModelConfig& c, int64_t index, nn::ParameterList& params) {
  if (!is_moe_layer(c, index)) return build_dense_mlp(c, index, params);
  // Registered as Qwen3VLMoeTextSparseMoeBlock registers them: the experts, then the router (the order
  // named_parameters() lists, which an optimizer's step follows).
  std::unique_ptr<nn::MoeExperts> experts = make_routed_experts(c, index, c.moe.moe_intermediate_size, params);
  nn::TopKRouter gate = make_topk_router(c, {/*norm_topk_prob=*/true, /*weights_in_logits_dtype=*/true}, params);
  return std::make_unique<nn::SparseMoeBlock>("mlp", std::move(gate), std::move(experts), nn::SharedExpert{},
                                              c.hidden_size, params);
}

std::unique_ptr<DecoderLayer> build_qwen3_vl_moe_text_layer(const ModelConfig& config, int64_t index) {
  return std::make_unique<LlamaDecoderLayer>(config, index, build_qwen3_vl_moe_mlp);
}

}  // namespace

CENSUS_FAMILY(kQwen3VlMoeTextFamily) = {
    .model_type = "qwen3_vl_moe_text",
    .read = read_qwen3_vl_moe_text,
    .build_layer = build_qwen3_vl_moe_text_layer,
    .build_final_norm = build_llama_final_norm,
    .build_causal_lm = build_multi_grid_rotary_causal_lm,
    .ties_word_embeddings = true,
    .liger_patches = true,
};

namespace {

// Qwen3VLMoeTextConfig: Qwen3's attention fields (head_dim hidden / heads unless stated, attention_bias
// for q, k, v and o) with its own defaults; num_experts (attribute_map: num_local_experts) experts of
// moe_intermediate_size on every decoder_sparse_step-th layer not in mlp_only_layers. It has no
// norm_topk_prob: its router always renormalizes.
Result<ModelConfig> read_qwen3_vl_moe_text(const ConfigReader& r) {
  CENSUS_ASSIGN(ModelConfig c,
                read_llama_like(r, kQwen3VlMoeTextFamily, {151936, 2048, 5632, 24, 16, 16, std::nullopt}));
  CENSUS_TRY(read_attention_bias(r, c));
  c.qk_norm = true;
  CENSUS_TRY(read_routed_experts(r, "num_experts", "num_local_experts", 60, 4, c.moe));
  CENSUS_TRY(read_qwen_sparse_layers(r, c, 1408, true));
  c.moe.norm_topk_prob = true;
  return c;
}

}  // namespace
}  // namespace census
