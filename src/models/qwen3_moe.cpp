// Qwen3-MoE (transformers/models/qwen3_moe/modeling_qwen3_moe.py, Transformers 5): Qwen3's attention
// and, on its sparse layers, Qwen3MoeSparseMoeBlock: the softmax top-k router (weights cast back to
// bf16) and the routed experts (nn/sparse_moe_block.h).
#include "models/llama.h"
#include "models/moe_layers.h"
#include "models/qwen2_moe.h"
#include "nn/sparse_moe_block.h"

namespace census {
namespace {

Result<ModelConfig> read_qwen3_moe(const ConfigReader& r);

std::unique_ptr<nn::FeedForward> build_qwen3_moe_mlp(const ModelConfig& c, int64_t index, nn::ParameterList& params) {
  if (!is_moe_layer(c, index)) return build_dense_mlp(c, index, params);
  // Registered as Qwen3MoeSparseMoeBlock registers them: the experts, then the router (the order
  // named_parameters() lists, which an optimizer's step follows).
  std::unique_ptr<nn::MoeExperts> experts = make_routed_experts(c, index, c.moe.moe_intermediate_size, params);
  nn::TopKRouter gate = make_topk_router(c, {c.moe.norm_topk_prob, /*weights_in_logits_dtype=*/true}, params);
  return std::make_unique<nn::SparseMoeBlock>("mlp", std::move(gate), std::move(experts), nn::SharedExpert{},
                                              c.hidden_size, params);
}

std::unique_ptr<DecoderLayer> build_qwen3_moe_layer(const ModelConfig& config, int64_t index) {
  return std::make_unique<LlamaDecoderLayer>(config, index, build_qwen3_moe_mlp);
}

}  // namespace

CENSUS_FAMILY(kQwen3MoeFamily) = {.model_type = "qwen3_moe", .read = read_qwen3_moe,
                                  .build_layer = build_qwen3_moe_layer, .build_final_norm = build_llama_final_norm,
                                  .class_prefix = "Qwen3Moe", .names_llama_tp_plan = true,
    .liger_patches = true, .float8_linears = true,
    .peft_lora = true, .peft_expert_names = "gate,gate_proj,up_proj,down_proj", .bnb_4bit = true, .autocast = true};  // PEFT maps no default targets for qwen3_moe

namespace {

// Qwen3MoeConfig: Qwen3's attention (per-head q/k norms; head_dim not a field, so hidden/heads unless
// stated), attention_bias for q, k, v and o.
Result<ModelConfig> read_qwen3_moe(const ConfigReader& r) {
  CENSUS_ASSIGN(ModelConfig c, read_llama_like(r, kQwen3MoeFamily, {151936, 2048, 6144, 24, 32, 4, std::nullopt}));
  CENSUS_TRY(read_attention_bias(r, c));
  c.qk_norm = true;
  CENSUS_TRY(read_routed_experts(r, "num_experts", "num_local_experts", 128, 8, c.moe));
  CENSUS_TRY(read_qwen_sparse_layers(r, c, 768, false));
  CENSUS_TRY(read_stated_layer_types(r, c));
  return c;
}

}  // namespace
}  // namespace census
