// Qwen3.5-MoE's text model (transformers/models/qwen3_5_moe/modeling_qwen3_5_moe.py, Transformers 5;
// model_type qwen3_5_moe_text): Qwen3.5's layers with Qwen3_5MoeSparseMoeBlock (Qwen2-MoE's block: a
// sigmoid-gated shared expert beside the routed experts) as every layer's feed-forward.
#include "models/moe_layers.h"
#include "models/qwen3_5.h"
#include "models/qwen3_vl.h"

namespace census {
namespace {

Result<ModelConfig> read_qwen3_5_moe_text(const ConfigReader& r);

}  // namespace

CENSUS_FAMILY(kQwen3_5MoeTextFamily) = {
    .model_type = "qwen3_5_moe_text",
    .read = read_qwen3_5_moe_text,
    .build_layer = build_qwen3_5_layer,
    .build_final_norm = build_qwen3_next_final_norm,
    .build_causal_lm = build_multi_grid_rotary_causal_lm,
    .liger_patches = true,
};

namespace {

// Qwen3_5MoeTextConfig: 256 experts of width 512, top 8, a shared expert of 512; its router always
// renormalizes; every layer's feed-forward is the MoE block (Qwen2-MoE's structure).
Result<ModelConfig> read_qwen3_5_moe_text(const ConfigReader& r) {
  auto c = read_gated_delta_net_config(r, kQwen3_5MoeTextFamily, {248320, 2048, 512, 40, 16, 2, 256});
  CENSUS_TRY(c);
  CENSUS_TRY(read_routed_experts(r, "num_experts", "num_local_experts", 256, 8, c->moe));
  auto width = r.size("moe_intermediate_size", 512);
  CENSUS_TRY(width);
  auto shared = r.size("shared_expert_intermediate_size", 512);
  CENSUS_TRY(shared);
  c->moe.moe_intermediate_size = *width;
  c->moe.shared_expert_intermediate_size = *shared;
  c->moe.norm_topk_prob = true;
  return c;
}

}  // namespace
}  // namespace census
