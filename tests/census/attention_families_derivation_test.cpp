// Saved bytes, FLOPs and parameters derived op by op at production shapes, one test per family with a
// layer of its own (its config class's defaults, or the public checkpoint's sizes where the defaults
// are another model's).
//
// Legend: S = seq_length, H = hidden_size, Nh = heads, Nkv = key/value heads, D = head_dim,
// I = intermediate_size, E = experts, K = experts per token; bf16 is 2 bytes, fp32 4, complex64 8.
#include <gtest/gtest.h>

#include "census/layer_census.h"
#include "census/parts.h"
#include "models/registry.h"

namespace census {
namespace {

int64_t saved(const LayerCensus& c, SavedOp op) { return c.saved_by_op[static_cast<size_t>(op)]; }

ModelConfig config_of(const char* json) { return read_config(nlohmann::json::parse(json)).take(); }

// Two Llama RMSNorms over S rows of H: x.to(fp32) saved by pow and mul (4H a row), rsqrt's result (4 a
// row), the bf16 normalized rows saved by the weight's mul (2H a row).
int64_t llama_layer_norms(int64_t S, int64_t H) { return 2 * (6 * S * H + 4 * S); }

// FLOPs, 2 per multiply-add: q/k/v/o projections (queries and keys D wide, values Dv), the scores QK^T
// and AV at every pair of tokens.
int64_t attention_flops(int64_t S, int64_t H, int64_t Nh, int64_t Nkv, int64_t D, int64_t Dv) {
  return 2 * S * H * (Nh * D + Nkv * D + Nkv * Dv) + 2 * S * Nh * Dv * H;
}

// Seed-OSS-36B (SeedOssConfig's defaults but hidden 5120, as the checkpoint) at 4096 tokens, with
// residual dropout 0.1: each dropout keeps its (1, S, H) bf16 noise for its product's backward.
TEST(AttentionFamiliesDerivation, SeedOss36BAt4096Tokens) {
  const ModelConfig config = config_of(R"({"model_type": "seed_oss", "hidden_size": 5120})");
  const int64_t S = 4096, H = 5120, Nh = 80, Nkv = 8, D = 128, I = 27648;
  const LayerCensus c = census_layer(config, 0, S);
  // attMM: the normed input saved once by the q/k/v addmm (2SH); cos and sin (2 * 2SD); o_proj's input
  // (2S Nh D); the attention dropout's noise (2SH).
  EXPECT_EQ(saved(c, SavedOp::kAttMM), 2 * S * H + 4 * S * D + 2 * S * Nh * D + 2 * S * H);
  EXPECT_EQ(saved(c, SavedOp::kAttBMM), 4 * S * D * (Nh + Nkv));
  EXPECT_EQ(saved(c, SavedOp::kSoftmax), 2 * 4 * Nh * S * 8);
  EXPECT_EQ(saved(c, SavedOp::kNormOp), llama_layer_norms(S, H));
  // ffMM: the normed input (2SH), silu's and up_proj's outputs and their product (3 * 2SI), the MLP
  // dropout's noise (2SH). ffAct: gate_proj's output (2SI).
  EXPECT_EQ(saved(c, SavedOp::kFfMM), 2 * S * H + 6 * S * I + 2 * S * H);
  EXPECT_EQ(saved(c, SavedOp::kFfAct), 2 * S * I);
  EXPECT_EQ(c.saved_bytes, 2 * S * H + 4 * S * D + 2 * S * Nh * D + 2 * S * H + 4 * S * D * (Nh + Nkv) +
                               2 * 4 * Nh * S * 8 + llama_layer_norms(S, H) + 2 * S * H + 8 * S * I + 2 * S * H);
  const PartCounts flops = census_flops(config, 0, S);
  EXPECT_EQ(flops.at("attention"), attention_flops(S, H, Nh, Nkv, D, D));
  EXPECT_EQ(flops.at("scores"), 2 * Nh * S * S * 2 * D);
  EXPECT_EQ(flops.at("ffn"), 3 * 2 * S * H * I);
  // q/k/v biased, o_proj not.
  EXPECT_EQ(census_parameters(config, 0).parts.at("attention"), 2 * H * Nh * D + 2 * H * Nkv * D + (Nh + 2 * Nkv) * D);
}

// Phi-4 (microsoft/phi-4's sizes: hidden 5120, 40 heads, 10 KV heads, intermediate 17920) at 4096 tokens.
TEST(AttentionFamiliesDerivation, Phi4At4096Tokens) {
  const ModelConfig config = config_of(R"({"model_type": "phi3", "hidden_size": 5120, "intermediate_size": 17920,
                                           "num_attention_heads": 40, "num_key_value_heads": 10})");
  const int64_t S = 4096, H = 5120, Nh = 40, Nkv = 10, D = 128, I = 17920;
  const LayerCensus c = census_layer(config, 0, S);
  // attMM: qkv_proj's input (2SH); cos and sin (2 * 2SD); o_proj's input (2S Nh D).
  EXPECT_EQ(saved(c, SavedOp::kAttMM), 2 * S * H + 4 * S * D + 2 * S * Nh * D);
  // attBMM: the rotated q (a cat with the empty pass-through part) and out (2 * 2S Nh D), the rotated k
  // (2S Nkv D), and v, a view of qkv_proj's output: its whole storage, 2S (Nh + 2 Nkv) D.
  EXPECT_EQ(saved(c, SavedOp::kAttBMM), 4 * S * Nh * D + 2 * S * Nkv * D + 2 * S * (Nh + 2 * Nkv) * D);
  EXPECT_EQ(saved(c, SavedOp::kNormOp), llama_layer_norms(S, H));
  // ffMM: gate_up_proj's input (2SH), the activation (2SI, saved by the product), the product (2SI, by
  // down_proj). ffAct: gate_up_proj's (S, 2I) output, saved by silu (gate) and the product (up): 4SI.
  EXPECT_EQ(saved(c, SavedOp::kFfMM), 2 * S * H + 4 * S * I);
  EXPECT_EQ(saved(c, SavedOp::kFfAct), 4 * S * I);
  const PartCounts flops = census_flops(config, 0, S);
  EXPECT_EQ(flops.at("attention"), attention_flops(S, H, Nh, Nkv, D, D));
  EXPECT_EQ(flops.at("ffn"), 3 * 2 * S * H * I);
  const LayerParameters parameters = census_parameters(config, 0);
  EXPECT_EQ(parameters.parts.at("attention"), H * (Nh + 2 * Nkv) * D + Nh * D * H);
  EXPECT_EQ(parameters.parts.at("ffn"), 3 * H * I);
}

// Phi-4-mini's partial rotary (0.75 of head_dim 128): cos and sin are 96 wide; the rotated part and the
// pass-through part are concatenated back.
TEST(AttentionFamiliesDerivation, Phi4MiniPartialRotaryAt4096Tokens) {
  const ModelConfig config = config_of(R"({"model_type": "phi3", "hidden_size": 3072, "intermediate_size": 8192,
                                           "num_attention_heads": 24, "num_key_value_heads": 8,
                                           "partial_rotary_factor": 0.75})");
  const int64_t S = 4096, H = 3072, Nh = 24, Nkv = 8, D = 128, R = 96;
  const LayerCensus c = census_layer(config, 0, S);
  EXPECT_EQ(saved(c, SavedOp::kAttMM), 2 * S * H + 4 * S * R + 2 * S * Nh * D);
  EXPECT_EQ(saved(c, SavedOp::kAttBMM), 4 * S * Nh * D + 2 * S * Nkv * D + 2 * S * (Nh + 2 * Nkv) * D);
}

// SmolLM3-3B (SmolLM3Config's defaults) at 4096 tokens: a rotary layer (0) and a NoPE layer (3), which
// keeps no cos and sin.
TEST(AttentionFamiliesDerivation, SmolLM3_3BAt4096Tokens) {
  const ModelConfig config = config_of(R"({"model_type": "smollm3"})");
  const int64_t S = 4096, H = 2048, Nh = 16, Nkv = 4, D = 128, I = 11008;
  ASSERT_EQ(layer_kind(config, 0), "rope");
  ASSERT_EQ(layer_kind(config, 3), "nope");
  const LayerCensus rope = census_layer(config, 0, S);
  const LayerCensus nope = census_layer(config, 3, S);
  EXPECT_EQ(saved(rope, SavedOp::kAttMM), 2 * S * H + 4 * S * D + 2 * S * Nh * D);
  EXPECT_EQ(saved(nope, SavedOp::kAttMM), 2 * S * H + 2 * S * Nh * D);
  for (const LayerCensus* c : {&rope, &nope}) {
    EXPECT_EQ(saved(*c, SavedOp::kAttBMM), 4 * S * D * (Nh + Nkv));
    EXPECT_EQ(saved(*c, SavedOp::kNormOp), llama_layer_norms(S, H));
    EXPECT_EQ(saved(*c, SavedOp::kFfMM), 2 * S * H + 6 * S * I);
    EXPECT_EQ(saved(*c, SavedOp::kFfAct), 2 * S * I);
  }
  EXPECT_EQ(rope.saved_bytes - nope.saved_bytes, 4 * S * D);
  EXPECT_EQ(census_flops(config, 3, S).at("attention"), attention_flops(S, H, Nh, Nkv, D, D));
}

// OLMo-3-7B (Olmo3Config's defaults) at 4096 tokens. Post-norm: q/k/v_proj keep the layer's input
// itself; the norms apply the weight to the fp32 states, so each keeps x.float() (4W a row), the fp32
// normalized rows (4W a row, saved by the weight's mul) and rsqrt's result (4 a row): the two layer
// norms over rows of H, q_norm over rows of Nh D, k_norm over rows of Nkv D. cos and sin stay fp32.
TEST(AttentionFamiliesDerivation, Olmo3_7BAt4096Tokens) {
  const ModelConfig config = config_of(R"({"model_type": "olmo3"})");
  const int64_t S = 4096, H = 4096, Nh = 32, Nkv = 32, D = 128, I = 11008;
  const LayerCensus c = census_layer(config, 0, S);
  EXPECT_EQ(saved(c, SavedOp::kAttMM), 2 * S * H + 2 * 4 * S * D + 2 * S * Nh * D);
  EXPECT_EQ(saved(c, SavedOp::kAttBMM), 4 * S * D * (Nh + Nkv));
  EXPECT_EQ(saved(c, SavedOp::kNormOp), 2 * (8 * S * H + 4 * S) + (8 * S * Nh * D + 4 * S) + (8 * S * Nkv * D + 4 * S));
  EXPECT_EQ(saved(c, SavedOp::kFfMM), 2 * S * H + 6 * S * I);
  EXPECT_EQ(saved(c, SavedOp::kFfAct), 2 * S * I);
  const PartCounts flops = census_flops(config, 0, S);
  EXPECT_EQ(flops.at("attention"), attention_flops(S, H, Nh, Nkv, D, D));
  EXPECT_EQ(flops.at("ffn"), 3 * 2 * S * H * I);
  const LayerParameters parameters = census_parameters(config, 0);
  EXPECT_EQ(parameters.parts.at("norm"), 2 * H + Nh * D + Nkv * D);
  EXPECT_EQ(parameters.final_norm, H);
}

// MiMo-V2-Flash (MiMoV2FlashConfig's defaults: head_dim 192, v_head_dim 128, rotary int(192 * 0.334)
// = 64 wide) at 4096 tokens: the full dense layer 0, and the sliding layer 1's attention (twice the KV
// heads; its 64 sinks are parameters the kernel keeps nothing of).
TEST(AttentionFamiliesDerivation, MiMoV2FlashAt4096Tokens) {
  const ModelConfig config = config_of(R"({"model_type": "mimo_v2_flash"})");
  const int64_t S = 4096, H = 4096, Nh = 64, Nkv = 4, D = 192, Dv = 128, R = 64, I = 16384;
  const LayerCensus full = census_layer(config, 0, S);
  // attMM: the normed input (2SH), cos and sin (2 * 2SR), o_proj's input (2S Nh Dv). The value scale is
  // a Python number: its product keeps nothing.
  EXPECT_EQ(saved(full, SavedOp::kAttMM), 2 * S * H + 4 * S * R + 2 * S * Nh * Dv);
  // attBMM: q (2S Nh D), k (2S Nkv D), the scaled v (2S Nkv Dv), out (2S Nh Dv).
  EXPECT_EQ(saved(full, SavedOp::kAttBMM), 2 * S * (Nh + Nkv) * (D + Dv));
  EXPECT_EQ(saved(full, SavedOp::kFfMM), 2 * S * H + 6 * S * I);
  EXPECT_EQ(census_flops(config, 0, S).at("attention"), attention_flops(S, H, Nh, Nkv, D, Dv));
  const LayerCensus sliding = census_layer(config, 1, S);
  EXPECT_EQ(saved(sliding, SavedOp::kAttBMM), 2 * S * (Nh + 2 * Nkv) * (D + Dv));
  EXPECT_EQ(census_parameters(config, 1).parts.at("attention"),
            H * Nh * D + H * 2 * Nkv * (D + Dv) + Nh * Dv * H + Nh);
}

// Llama-4-Scout-17B-16E (Llama4TextConfig's defaults) at 4096 tokens: layer 0 rotates (complex64
// freqs_cis (1, S, D/2), 4SD bytes, kept by the q and k products) and L2-norms q and k; layer 3 is NoPE
// with the attention temperature (its (S) fp32 scales kept by the queries' product). Every layer is
// MoE: 16 experts over every token.
TEST(AttentionFamiliesDerivation, Llama4ScoutAt4096Tokens) {
  const ModelConfig config = config_of(R"({"model_type": "llama4_text"})");
  const int64_t S = 4096, H = 5120, Nh = 40, Nkv = 8, D = 128, I = 8192, E = 16, K = 1;
  const LayerCensus rope = census_layer(config, 0, S);
  const LayerCensus nope = census_layer(config, 3, S);
  // attMM: the normed input (2SH), o_proj's input (2S Nh D), and freqs_cis or the temperature scales.
  EXPECT_EQ(saved(rope, SavedOp::kAttMM), 2 * S * H + 2 * S * Nh * D + 4 * S * D);
  EXPECT_EQ(saved(nope, SavedOp::kAttMM), 2 * S * H + 2 * S * Nh * D + 4 * S);
  EXPECT_EQ(saved(rope, SavedOp::kAttBMM), 4 * S * D * (Nh + Nkv));
  // normOp: Llama4TextRMSNorm keeps x.float() (4H a row), rsqrt (4) and the bf16 normed rows (2H, by
  // the weight's mul); the L2 norm of q and k keeps their float() (4D a row of a head) and rsqrt (4).
  EXPECT_EQ(saved(nope, SavedOp::kNormOp), llama_layer_norms(S, H));
  EXPECT_EQ(saved(rope, SavedOp::kNormOp), llama_layer_norms(S, H) + 4 * S * (Nh + Nkv) * D + 4 * S * (Nh + Nkv));
  // ffMM: the router's input (2SH, also the shared expert's gate and up input); the sigmoid's fp32
  // scores (4SE); the top-k indices (8SK); the repeated inputs (E S, H) and their scores (E S, 1), both
  // kept by their product (2ESH + 2ES); the experts' first bmm input, a view of that product (2ESH);
  // the activation and the gated product (2 * 2ESI); the shared expert's activation, up and product
  // (3 * 2SI). ffAct: the experts' (E, S, 2I) gate_up (4ESI) and the shared expert's gate (2SI).
  const int64_t ff_mm = 2 * S * H + 4 * S * E + 8 * S * K + 2 * E * S * H + 2 * E * S + 2 * E * S * H +
                        4 * E * S * I + 6 * S * I;
  EXPECT_EQ(saved(rope, SavedOp::kFfMM), ff_mm);
  EXPECT_EQ(saved(rope, SavedOp::kFfAct), 4 * E * S * I + 2 * S * I);
  // The experts' FLOPs run over every token for every expert: two bmm of E S H 2I and E S I H.
  const PartCounts flops = census_flops(config, 0, S);
  EXPECT_EQ(flops.at("attention"), attention_flops(S, H, Nh, Nkv, D, D));
  EXPECT_EQ(census_parameters(config, 0).parts.at("routed"), E * H * 2 * I + E * I * H);
}

}  // namespace
}  // namespace census
