// Golden numbers derived op by op for the later MoE families at public checkpoints' shapes, 4096
// tokens, where no oracle case runs: what each MoE layer's router, routed experts and shared experts
// save, their FLOPs and parameters, as closed forms a reader can check by hand. The same forms give
// the oracle's numbers at its toy shapes (moe_families_golden_test.cpp). The shapes are the checkpoints'
// architecture fields, stated here (not their config.json files).
//
// Legend: T = tokens, H = hidden_size, E = routed experts, K = experts per token, S = T * K pairs,
// I = an expert's width, Ish = the shared experts' width, Nh / Nkv = heads / key-value heads,
// D = head_dim; bf16 is 2 bytes, fp32 and int32 4, int64 8, bool 1.
#include <gtest/gtest.h>

#include "census/layer_census.h"
#include "census/parts.h"
#include "models/registry.h"

namespace census {
namespace {

ModelConfig config_of(const nlohmann::json& json) { return read_config(json).take(); }

int64_t saved(const LayerCensus& c, SavedOp op) { return c.saved_by_op[static_cast<size_t>(op)]; }

struct MoeShape {
  int64_t T, H, E, K, I;
  int64_t S() const { return T * K; }
};

// The grouped_mm experts, per pair: the gathered inputs (S, H) and the gated product (S, I) by the two
// _grouped_mm; the activation's output (S, I) by the product; the down projection (S, H) and the
// routing weights (S, 1) by the weighting; three int64 gather indices (S); the sentinel mask (S, 1)
// bool; the int32 offsets (E). The up projection (S, 2I) is the activation's (ffAct).
int64_t experts_ffmm(const MoeShape& x, int64_t weight_bytes) {
  return 2 * x.S() * x.H + 2 * x.S() * x.I + 2 * x.S() * x.I + 2 * x.S() * x.H + weight_bytes * x.S() + 3 * 8 * x.S() +
         x.S() + 4 * x.E;
}
int64_t experts_ffact(const MoeShape& x) { return 2 * x.S() * 2 * x.I; }
// A gated MLP of width W on (T, H): its input by gate_proj and up_proj (one storage), the gate and up
// outputs by the product, the activation's output by the product, the product by down_proj; the gate
// output also by the activation (ffAct).
int64_t mlp_ffmm(int64_t T, int64_t H, int64_t W) { return 2 * T * H + 3 * 2 * T * W; }
// FLOPs of the routed experts (each pair's gate_up and down) and of a gated MLP.
int64_t routed_flops(const MoeShape& x) { return 2 * x.S() * x.H * 2 * x.I + 2 * x.S() * x.I * x.H; }
int64_t mlp_flops(int64_t T, int64_t H, int64_t W) { return 3 * 2 * T * H * W; }
// An RMSNorm over W channels of T rows: the fp32 copy (pow, mul), rsqrt's (T, 1) fp32, the bf16
// normalized rows (the weight's mul).
int64_t norm_saved(int64_t T, int64_t W) { return 4 * T * W + 4 * T + 2 * T * W; }

// GLM-4.5-Air (Glm4MoeConfig's defaults, head_dim 128, q/k/v biased): a MoE layer (layer 1). The
// router is DeepSeek-V3's: fp32 copies of x (T, H) and of the weight (E, H) by its mm, the sigmoid
// scores (T, E), the indices (T, K), the renormalization's clone (T, K) and denominator (T, 1); its
// fp32 weights go to the experts. The shared expert (Ish = I) saves as a dense MLP. Attention: the
// normed input (T, H) and o_proj's input (T, Nh*D) by the projections, and the partial rotary's cos
// and sin (T, D/2) bf16 each; the flash contract's q and out (Nh, T, D), k and v (Nkv, T, D) and two
// fp32 (Nh, T, 8) statistics; the two norms.
TEST(MoeFamiliesDerivation, Glm45AirMoeLayerAt4096Tokens) {
  const ModelConfig config = config_of({{"model_type", "glm4_moe"}, {"head_dim", 128}, {"attention_bias", true}});
  const MoeShape x{4096, 4096, 128, 8, 1408};
  const int64_t Nh = 96, Nkv = 8, D = 128, R = 64, T = x.T, H = x.H;
  ASSERT_EQ(config.rotary_dim, R);
  const LayerCensus c = census_layer(config, 1, T);
  const int64_t router = 4 * T * H + 4 * x.E * H + 4 * T * x.E + 8 * T * x.K + 4 * T * x.K + 4 * T;
  EXPECT_EQ(saved(c, SavedOp::kFfMM), router + experts_ffmm(x, 4) + mlp_ffmm(T, H, x.I));
  EXPECT_EQ(saved(c, SavedOp::kFfAct), experts_ffact(x) + 2 * T * x.I);
  EXPECT_EQ(saved(c, SavedOp::kAttMM), 2 * T * H + 2 * T * Nh * D + 2 * 2 * T * R);
  EXPECT_EQ(saved(c, SavedOp::kAttBMM), 2 * 2 * T * Nh * D + 2 * 2 * T * Nkv * D);
  EXPECT_EQ(saved(c, SavedOp::kSoftmax), 2 * 4 * Nh * T * 8);
  EXPECT_EQ(saved(c, SavedOp::kNormOp), 2 * norm_saved(T, H));

  // FLOPs: the projections, the scores (4 T^2 Nh D, unmasked as the contract counts them), the
  // router's T*H*E, the experts' pairs and the shared expert.
  const PartCounts flops = census_flops(config, 1, T);
  EXPECT_EQ(flops.at("attention"), 2 * T * H * Nh * D * 2 + 2 * 2 * T * H * Nkv * D);
  EXPECT_EQ(flops.at("scores"), 4 * T * T * Nh * D);
  EXPECT_EQ(flops.at("router"), 2 * T * H * x.E);
  EXPECT_EQ(flops.at("routed"), routed_flops(x));
  EXPECT_EQ(flops.at("shared"), mlp_flops(T, H, x.I));
  const LayerParameters parameters = census_parameters(config, 1);
  EXPECT_EQ(parameters.parts.at("attention"), 2 * H * Nh * D + 2 * H * Nkv * D + Nh * D + 2 * Nkv * D);
  EXPECT_EQ(parameters.parts.at("router"), x.E * H);  // e_score_correction_bias is a buffer
  EXPECT_EQ(parameters.parts.at("routed"), x.E * 3 * H * x.I);
  EXPECT_EQ(parameters.parts.at("shared"), 3 * H * x.I);
}

// Qwen3-VL-30B-A3B's text tower: Qwen3-MoE's router (the normed input (T, H) bf16 by its mm, fp32
// probabilities (T, E), indices (T, K), the in-place renormalization's clone (T, K) and sum (T, 1)),
// always renormalizing, the weights cast back to bf16.
TEST(MoeFamiliesDerivation, Qwen3Vl30bA3bTextMoeLayerAt4096Tokens) {
  const ModelConfig config = config_of(
      {{"model_type", "qwen3_vl_moe"},
       {"text_config",
        {{"model_type", "qwen3_vl_moe_text"}, {"hidden_size", 2048}, {"num_attention_heads", 32},
         {"num_key_value_heads", 4}, {"head_dim", 128}, {"num_experts", 128}, {"num_experts_per_tok", 8},
         {"moe_intermediate_size", 768}, {"intermediate_size", 6144}, {"num_hidden_layers", 48}}}});
  const MoeShape x{4096, 2048, 128, 8, 768};
  const LayerCensus c = census_layer(config, 0, x.T);
  const int64_t router = 2 * x.T * x.H + 4 * x.T * x.E + 8 * x.T * x.K + 4 * x.T * x.K + 4 * x.T;
  EXPECT_EQ(saved(c, SavedOp::kFfMM), router + experts_ffmm(x, 2));
  EXPECT_EQ(saved(c, SavedOp::kFfAct), experts_ffact(x));
  const PartCounts flops = census_flops(config, 0, x.T);
  EXPECT_EQ(flops.at("router"), 2 * x.T * x.H * x.E);
  EXPECT_EQ(flops.at("routed"), routed_flops(x));
  EXPECT_EQ(census_parameters(config, 0).parts.at("routed"), x.E * 3 * x.H * x.I);
}

// Kimi K2 (read as DeepSeek-V3): 384 experts of 2048, top 8, one group, one shared expert, 64 heads
// of MLA; its router as DeepSeek-V3's (the correction bias bf16 as the layer is built).
TEST(MoeFamiliesDerivation, KimiK2MoeLayerAt4096Tokens) {
  const ModelConfig config = config_of({{"model_type", "kimi_k2"}, {"hidden_size", 7168}, {"num_attention_heads", 64},
                                        {"num_key_value_heads", 64}, {"n_routed_experts", 384}, {"n_group", 1},
                                        {"topk_group", 1}, {"first_k_dense_replace", 1}, {"num_hidden_layers", 61},
                                        {"routed_scaling_factor", 2.827}});
  const MoeShape x{4096, 7168, 384, 8, 2048};
  const LayerCensus c = census_layer(config, 1, x.T);
  const int64_t router = 4 * x.T * x.H + 4 * x.E * x.H + 4 * x.T * x.E + 8 * x.T * x.K + 4 * x.T * x.K + 4 * x.T;
  EXPECT_EQ(saved(c, SavedOp::kFfMM), router + experts_ffmm(x, 4) + mlp_ffmm(x.T, x.H, x.I));
  EXPECT_EQ(saved(c, SavedOp::kFfAct), experts_ffact(x) + 2 * x.T * x.I);
  const PartCounts flops = census_flops(config, 1, x.T);
  EXPECT_EQ(flops.at("router"), 2 * x.T * x.H * x.E);
  EXPECT_EQ(flops.at("routed"), routed_flops(x));
  EXPECT_EQ(flops.at("shared"), mlp_flops(x.T, x.H, x.I));
  EXPECT_EQ(layer_stack(config).front().kind, "dense");
}

// GLM-4.7-Flash (Glm4MoeLiteConfig's defaults): MLA (q_lora 768, kv_lora 512, nope 192, rope 64,
// values 256, 20 heads) and 64 experts of 1536, top 4, one shared expert; the router as GLM-4.5's.
TEST(MoeFamiliesDerivation, Glm47FlashMoeLayerAt4096Tokens) {
  const ModelConfig config = config_of({{"model_type", "glm4_moe_lite"}});
  const MoeShape x{4096, 2048, 64, 4, 1536};
  const LayerCensus c = census_layer(config, 1, x.T);
  const int64_t router = 4 * x.T * x.H + 4 * x.E * x.H + 4 * x.T * x.E + 8 * x.T * x.K + 4 * x.T * x.K + 4 * x.T;
  EXPECT_EQ(saved(c, SavedOp::kFfMM), router + experts_ffmm(x, 4) + mlp_ffmm(x.T, x.H, x.I));
  EXPECT_EQ(saved(c, SavedOp::kFfAct), experts_ffact(x) + 2 * x.T * x.I);
  const PartCounts flops = census_flops(config, 1, x.T);
  EXPECT_EQ(flops.at("router"), 2 * x.T * x.H * x.E);
  EXPECT_EQ(flops.at("routed"), routed_flops(x));
  // MLA: q_a (H -> 768), its norm, q_b (768 -> 20*(192 + 64)), kv_a (H -> 512 + 64), its norm,
  // kv_b (512 -> 20*(192 + 256)), o (20*256 -> H).
  EXPECT_EQ(census_parameters(config, 1).parts.at("attention"),
            x.H * 768 + 768 + 768 * 20 * 256 + x.H * 576 + 512 + 512 * 20 * 448 + 20 * 256 * x.H);
  EXPECT_EQ(layer_kind(config, 0), "dense");
  EXPECT_EQ(layer_kind(config, 1), "moe");
}

// MiniMax-M2 (MiniMaxM2Config's defaults): q_norm over Nh*D and k_norm over Nkv*D, each saving as a
// norm over that width; the sigmoid router (the bf16 input (T, H) by its mm, the fp32 scores (T, E)
// by sigmoid and gather, the indices (T, K), the in-place renormalization's clone (T, K) and sum
// (T, 1)); fp32 weights to the experts of intermediate_size.
TEST(MoeFamiliesDerivation, MiniMaxM2LayerAt4096Tokens) {
  const ModelConfig config = config_of({{"model_type", "minimax_m2"}});
  const MoeShape x{4096, 3072, 256, 8, 1536};
  const int64_t Nh = 48, Nkv = 8, D = 128, T = x.T;
  const LayerCensus c = census_layer(config, 0, T);
  const int64_t router = 2 * T * x.H + 4 * T * x.E + 8 * T * x.K + 4 * T * x.K + 4 * T;
  EXPECT_EQ(saved(c, SavedOp::kFfMM), router + experts_ffmm(x, 4));
  EXPECT_EQ(saved(c, SavedOp::kFfAct), experts_ffact(x));
  EXPECT_EQ(saved(c, SavedOp::kNormOp), 2 * norm_saved(T, x.H) + norm_saved(T, Nh * D) + norm_saved(T, Nkv * D));
  const PartCounts flops = census_flops(config, 0, T);
  EXPECT_EQ(flops.at("router"), 2 * T * x.H * x.E);
  EXPECT_EQ(flops.at("routed"), routed_flops(x));
  // At TP 2 a rank's norms are over its own heads: Nh/2*D and Nkv/2*D.
  const LayerCensus rank = census_layer(tp_config(config, 2), 0, T);
  EXPECT_EQ(saved(rank, SavedOp::kNormOp),
            2 * norm_saved(T, x.H) + norm_saved(T, Nh / 2 * D) + norm_saved(T, Nkv / 2 * D));
}

// ERNIE-4.5-21B-A3B: the fp32 router (an fp32 copy of x (T, H) by its mm, probabilities (T, E) by
// softmax, indices (T, K), the sum (T, 1) by clamp, the gathered probabilities (T, K) and the clamped
// sum (T, 1) by the division), bf16 weights to the experts; two shared experts (Ish = 2I) on the
// (T, H) input; the fp32 rotary's cos and sin (T, D) fp32 each, saved by its fp32 products.
TEST(MoeFamiliesDerivation, Ernie45_21bA3bMoeLayerAt4096Tokens) {
  const ModelConfig config = config_of({{"model_type", "ernie4_5_moe"}, {"hidden_size", 2560},
                                        {"num_attention_heads", 20}, {"num_key_value_heads", 4},
                                        {"moe_num_experts", 64}, {"moe_k", 6}, {"moe_intermediate_size", 1536},
                                        {"moe_num_shared_experts", 2}, {"num_hidden_layers", 28}});
  const MoeShape x{4096, 2560, 64, 6, 1536};
  const int64_t T = x.T, Ish = 2 * x.I, D = 128, Nh = 20;
  const LayerCensus c = census_layer(config, 1, T);
  const int64_t router = 4 * T * x.H + 4 * T * x.E + 8 * T * x.K + 4 * T + 4 * T * x.K + 4 * T;
  EXPECT_EQ(saved(c, SavedOp::kFfMM), router + experts_ffmm(x, 2) + mlp_ffmm(T, x.H, Ish));
  EXPECT_EQ(saved(c, SavedOp::kFfAct), experts_ffact(x) + 2 * T * Ish);
  EXPECT_EQ(saved(c, SavedOp::kAttMM), 2 * T * x.H + 2 * T * Nh * D + 2 * 4 * T * D);
  const PartCounts flops = census_flops(config, 1, T);
  EXPECT_EQ(flops.at("router"), 2 * T * x.H * x.E);
  EXPECT_EQ(flops.at("routed"), routed_flops(x));
  EXPECT_EQ(flops.at("shared"), mlp_flops(T, x.H, Ish));
  const LayerParameters parameters = census_parameters(config, 1);
  EXPECT_EQ(parameters.parts.at("router"), x.E * x.H);
  EXPECT_EQ(parameters.parts.at("ffn"), x.E);  // moe_statics.e_score_correction_bias, no gradient
  EXPECT_EQ(layer_kind(config, 0), "dense");
}

// Hunyuan-A13B: the router's fp32 wg (an fp32 copy of x (T, H) by wg, probabilities (T, E), indices
// (T, K), the in-place renormalization's clone (T, K) and sum (T, 1)), fp32 weights to experts of
// intermediate_size; the shared MLP of intermediate_size on the (1, T, H) input.
TEST(MoeFamiliesDerivation, HunyuanA13bLayerAt4096Tokens) {
  const ModelConfig config = config_of({{"model_type", "hunyuan_v1_moe"}, {"hidden_size", 4096},
                                        {"intermediate_size", 3072}, {"num_attention_heads", 32},
                                        {"num_key_value_heads", 8}, {"head_dim", 128}, {"num_experts", 64},
                                        {"moe_topk", 8}, {"num_hidden_layers", 32}});
  const MoeShape x{4096, 4096, 64, 8, 3072};
  const int64_t T = x.T;
  const LayerCensus c = census_layer(config, 0, T);
  const int64_t router = 4 * T * x.H + 4 * T * x.E + 8 * T * x.K + 4 * T * x.K + 4 * T;
  EXPECT_EQ(saved(c, SavedOp::kFfMM), router + experts_ffmm(x, 4) + mlp_ffmm(T, x.H, x.I));
  EXPECT_EQ(saved(c, SavedOp::kFfAct), experts_ffact(x) + 2 * T * x.I);
  const PartCounts flops = census_flops(config, 0, T);
  EXPECT_EQ(flops.at("ffn"), 2 * T * x.H * x.E);  // the router's wg: "ffn" as the reference parts its path
  EXPECT_EQ(flops.at("routed"), routed_flops(x));
  EXPECT_EQ(flops.at("shared"), mlp_flops(T, x.H, x.I));
  EXPECT_EQ(census_parameters(config, 0).parts.at("ffn"), x.E * x.H);
}

}  // namespace
}  // namespace census
