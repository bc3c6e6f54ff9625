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

}  // namespace
}  // namespace census
