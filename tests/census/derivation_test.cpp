// Golden numbers derived op by op for public model shapes, where no oracle case runs: what a
// Llama-like layer saves, its FLOPs and its parameters, as closed forms a reader can check by hand.
//
// Legend: S = seq_length, H = hidden_size, Nh = heads, Nkv = key/value heads, D = head_dim,
// I = intermediate_size; bf16 is 2 bytes, fp32 4.
#include <gtest/gtest.h>

#include "census/layer_census.h"
#include "census/parts.h"
#include "cli/request.h"
#include "models/registry.h"

namespace census {
namespace {

ModelConfig shipped(const char* name) { return cli::resolve_model(name).take(); }

int64_t saved(const LayerCensus& c, SavedOp op) { return c.saved_by_op[static_cast<size_t>(op)]; }

struct Shape {
  int64_t S, H, Nh, Nkv, D, I;
};

void expect_llama_like(const ModelConfig& config, int64_t seq, bool qk_norm) {
  const Shape x{seq, config.hidden_size, config.num_attention_heads, config.num_key_value_heads, config.head_dim,
                config.intermediate_size};
  const LayerCensus c = census_layer(config, 0, seq);
  // attMM: the input norm's output (1, S, H) bf16, saved by q/k/v_proj's mm: 2SH; cos and sin
  // (1, S, D) bf16 saved by the rotary muls: 2 * 2SD; the attention output (S, Nh*D) bf16 saved by
  // o_proj's mm: 2S*Nh*D.
  EXPECT_EQ(saved(c, SavedOp::kAttMM), 2 * x.S * x.H + 4 * x.S * x.D + 2 * x.S * x.Nh * x.D);
  // attBMM: the kernel's q and out (1, Nh, S, D) and k, v (1, Nkv, S, D), bf16, K/V not expanded.
  EXPECT_EQ(saved(c, SavedOp::kAttBMM), 4 * x.S * x.D * (x.Nh + x.Nkv));
  // softmax: the kernel's two fp32 statistics (1, Nh, S, 8).
  EXPECT_EQ(saved(c, SavedOp::kSoftmax), 2 * 4 * x.Nh * x.S * 8);
  // normOp, per RMSNorm over rows of width W: x.to(fp32) saved by pow and mul (4W a row), rsqrt's
  // result (4 a row), the bf16 normalized input saved by the weight's mul (2W a row). Two layer norms
  // over S rows of H; Qwen3's q_norm and k_norm over S*Nh and S*Nkv rows of D.
  int64_t norm = 2 * (6 * x.S * x.H + 4 * x.S);
  if (qk_norm) norm += 6 * x.S * (x.Nh + x.Nkv) * x.D + 4 * x.S * (x.Nh + x.Nkv);
  EXPECT_EQ(saved(c, SavedOp::kNormOp), norm);
  // ffMM: the post-attention norm's output saved by gate_proj and up_proj (2SH); silu's output and
  // up_proj's output saved by their product, and the product saved by down_proj (3 * 2SI).
  EXPECT_EQ(saved(c, SavedOp::kFfMM), 2 * x.S * x.H + 6 * x.S * x.I);
  // ffAct: gate_proj's output, saved by silu.
  EXPECT_EQ(saved(c, SavedOp::kFfAct), 2 * x.S * x.I);
  EXPECT_EQ(saved(c, SavedOp::kOther) + saved(c, SavedOp::kDropout) + saved(c, SavedOp::kLinrec), 0);

  // FLOPs: 2 per multiply-add. Projections S*H*(Nh + 2Nkv)*D in, S*Nh*D*H out; scores QK^T and AV at
  // every pair of tokens; three MLP matmuls of S*H*I.
  const PartCounts flops = census_flops(config, 0, seq);
  EXPECT_EQ(flops.at("attention"), 2 * x.S * x.H * (x.Nh + 2 * x.Nkv) * x.D + 2 * x.S * x.Nh * x.D * x.H);
  EXPECT_EQ(flops.at("scores"), 2 * x.Nh * x.S * x.S * 2 * x.D);
  EXPECT_EQ(flops.at("ffn"), 3 * 2 * x.S * x.H * x.I);

  const LayerParameters parameters = census_parameters(config, 0);
  EXPECT_EQ(parameters.parts.at("attention"), 2 * x.H * x.Nh * x.D + 2 * x.H * x.Nkv * x.D);
  EXPECT_EQ(parameters.parts.at("ffn"), 3 * x.H * x.I);
  EXPECT_EQ(parameters.parts.at("norm"), 2 * x.H + (qk_norm ? 2 * x.D : 0));
  EXPECT_EQ(parameters.final_norm, x.H);
}

TEST(Derivation, Llama31_8B_At4096Tokens) { expect_llama_like(shipped("llama-3.1-8b"), 4096, false); }
TEST(Derivation, Llama31_70B_At8192Tokens) { expect_llama_like(shipped("llama-3.1-70b"), 8192, false); }
TEST(Derivation, Mistral7B_At4096Tokens) { expect_llama_like(shipped("mistral-7b-v0.3"), 4096, false); }
TEST(Derivation, Qwen3_8B_At4096Tokens) { expect_llama_like(shipped("qwen3-8b"), 4096, true); }
TEST(Derivation, Qwen3_32B_At2048Tokens) { expect_llama_like(shipped("qwen3-32b"), 2048, true); }

// Qwen3-VL's text tower is Qwen3's layer; its rotary on three grids changes cos and sin's values only.
TEST(Derivation, Qwen3VL_8B_TextTowerAt4096Tokens) { expect_llama_like(shipped("qwen3-vl-8b"), 4096, true); }

// Gemma2 and Gemma3 (sandwich norms, GemmaRMSNorm): per norm over rows of width W, x.float() (4W a
// row, saved by pow and mul), rsqrt's result (4 a row), the fp32 normalized rows (4W a row) and the
// (W) fp32 1 + weight, both saved by the weight's mul. Four layer norms over S rows of H; Gemma3's
// q/k norms over S*Nh and S*Nkv rows of D. gelu-tanh saves its input as silu does.
void expect_gemma_like(const ModelConfig& config, int64_t S, bool qk_norm) {
  const int64_t H = config.hidden_size, Nh = config.num_attention_heads, Nkv = config.num_key_value_heads,
                D = config.head_dim, I = config.intermediate_size;
  const LayerCensus c = census_layer(config, 0, S);
  int64_t norm = 4 * (8 * S * H + 4 * S + 4 * H);
  if (qk_norm) norm += 8 * S * (Nh + Nkv) * D + 4 * S * (Nh + Nkv) + 2 * 4 * D;
  EXPECT_EQ(saved(c, SavedOp::kNormOp), norm);
  EXPECT_EQ(saved(c, SavedOp::kAttMM), 2 * S * H + 4 * S * D + 2 * S * Nh * D);
  EXPECT_EQ(saved(c, SavedOp::kAttBMM), 4 * S * D * (Nh + Nkv));
  EXPECT_EQ(saved(c, SavedOp::kFfMM), 2 * S * H + 6 * S * I);
  EXPECT_EQ(saved(c, SavedOp::kFfAct), 2 * S * I);
}

TEST(Derivation, Gemma2AndGemma3At2048Tokens) {
  const char* gemma2 = R"({"model_type": "gemma2", "hidden_size": 1024, "num_attention_heads": 8,
                           "num_key_value_heads": 4, "head_dim": 128, "intermediate_size": 4096})";
  expect_gemma_like(read_config(nlohmann::json::parse(gemma2)).take(), 2048, false);
  const char* gemma3 = R"({"model_type": "gemma3_text", "hidden_size": 1024, "num_attention_heads": 8,
                           "num_key_value_heads": 4, "head_dim": 128, "intermediate_size": 4096})";
  expect_gemma_like(read_config(nlohmann::json::parse(gemma3)).take(), 2048, true);
}

// Qwen2.5's biased q/k/v projections run as addmm, which saves the same input; their biases add
// parameters: (Nh + 2Nkv) * D.
TEST(Derivation, Qwen25_7B_BiasesAddParametersNotSaves) {
  const ModelConfig config = shipped("qwen2.5-7b");
  const LayerParameters parameters = census_parameters(config, 0);
  const int64_t H = config.hidden_size, D = config.head_dim, Nh = config.num_attention_heads,
                Nkv = config.num_key_value_heads;
  EXPECT_EQ(parameters.parts.at("attention"), 2 * H * Nh * D + 2 * H * Nkv * D + (Nh + 2 * Nkv) * D);
  const LayerCensus c = census_layer(config, 0, 1024);
  EXPECT_EQ(saved(c, SavedOp::kAttMM), 2 * 1024 * H + 4 * 1024 * D + 2 * 1024 * Nh * D);
}

}  // namespace
}  // namespace census
