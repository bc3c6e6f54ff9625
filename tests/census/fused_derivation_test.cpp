// HyperParallel's fused modules, as the public Qwen3-MoE recipe installs them (the fused RMSNorm,
// GQAAttention with npu_fusion_attention, GroupedExperts), on Qwen3-30B-A3B: what each kernel contract
// keeps, derived from the shapes op by op; and how the fused layer compares with Transformers' own.
//
// Legend: S = tokens (the sequence), H = hidden_size, Nh / Nkv = heads, D = head_dim, g = Nh / Nkv,
// E = experts, K = experts per token, P = S * K token-expert pairs, I = an expert's width; bf16 is 2
// bytes, fp32 and int32 4, int64 8.
#include <gtest/gtest.h>

#include "census/layer_census.h"
#include "census/output_census.h"
#include "census/parts.h"
#include "census/selective_census.h"
#include "cli/request.h"
#include "cli/train_yaml.h"
#include "oracle_cases.h"

namespace census {
namespace {

std::vector<ReplacementSpec> recipe() {
  auto specs = cli::read_train_yaml(std::string(CENSUS_TEST_DATA) + "/recipes/qwen3_moe_train.yaml");
  if (!specs) throw std::runtime_error(specs.refusal().message());
  return specs.take();
}

ModelConfig fused(const char* name) {
  ModelConfig config = cli::resolve_model(name).take();
  config.replacements = recipe();
  return config;
}

int64_t saved(const LayerCensus& c, SavedOp op) { return c.saved_by_op[static_cast<size_t>(op)]; }

TEST(FusedDerivation, TheRecipeInstallsThreeReplacementsAndSkipsItsConditionalEntries) {
  const auto specs = cli::read_train_yaml(std::string(CENSUS_TEST_DATA) + "/recipes/qwen3_moe_train.yaml").take();
  ASSERT_EQ(specs.size(), 3u);
  EXPECT_EQ(specs[0].match, (std::vector<std::string>{"*.input_layernorm", "*.post_attention_layernorm", "model.norm"}));
  EXPECT_EQ(specs[0].module, FusedModule::kRmsNorm);
  EXPECT_EQ(specs[1].module, FusedModule::kGqaFlashAttention);
  EXPECT_EQ(specs[2].module, FusedModule::kGroupedExperts);
  EXPECT_EQ(specs[2].module_type, "transformers.models.qwen3_moe.modeling_qwen3_moe.Qwen3MoeExperts");
}

TEST(FusedDerivation, Qwen3_30B_A3B_At256Tokens) {
  const ModelConfig config = fused("qwen3-30b-a3b");
  const int64_t S = 256, H = config.hidden_size, Nh = config.num_attention_heads, Nkv = config.num_key_value_heads,
                D = config.head_dim, g = Nh / Nkv, E = config.moe.num_experts, K = config.moe.num_experts_per_tok,
                P = S * K, I = config.moe.moe_intermediate_size;
  const LayerCensus c = census_layer(config, 0, S);

  // normOp. npu_rms_norm keeps its input (S, H) and the fp32 rstd (S, 1), for each layer norm (the
  // input norm's input is the layer's input). q_norm and k_norm stay Transformers' own: x.float(), the
  // fp32 rstd and the bf16 normalized rows, over S*Nh and S*Nkv rows of D.
  EXPECT_EQ(saved(c, SavedOp::kNormOp), 2 * (2 * S * H + 4 * S) + 6 * S * D * (Nh + Nkv) + 4 * S * (Nh + Nkv));
  // attMM. linear_qkv keeps the norm's output (S, H); npu_rotary_mul keeps its clones of q (S, Nh, D)
  // and k (S, Nkv, D) and the tables cos and sin (S, D); o_proj keeps the BSND output (S, Nh*D).
  EXPECT_EQ(saved(c, SavedOp::kAttMM), 2 * S * H + 2 * S * Nh * D + 2 * S * Nkv * D + 2 * 2 * S * D + 2 * S * Nh * D);
  // attBMM. npu_fusion_attention keeps q and out (Nh, S, D), k (Nkv, S, D), and v: a view of
  // linear_qkv's output, which it keeps whole (S, Nkv (g + 2) D).
  EXPECT_EQ(saved(c, SavedOp::kAttBMM), 2 * 2 * S * Nh * D + 2 * S * Nkv * D + 2 * S * Nkv * (g + 2) * D);
  // softmax. Its two fp32 statistics (Nh, S, 8).
  EXPECT_EQ(saved(c, SavedOp::kSoftmax), 2 * 4 * Nh * S * 8);
  // ffAct. npu_swiglu keeps its input, the gate and up projections side by side (P, 2I).
  EXPECT_EQ(saved(c, SavedOp::kFfAct), 2 * P * 2 * I);
  // ffMM. The router as Transformers runs it (its input (S, H), fp32 probabilities (S, E), indices
  // (S, K) int64, the renormalization's fp32 clone (S, K) and sum (S, 1)); npu_moe_token_permute's
  // order (P) int32 (its tokens and indices are the router's); the two GMMs' inputs, the permuted
  // tokens (P, H) and the SwiGLU output (P, I), and their int64 group list (E); the unpermute's
  // expert outputs (P, H) and bf16 routing weights (S, K).
  const int64_t router = 2 * S * H + 4 * S * E + 8 * S * K + 4 * S * K + 4 * S;
  const int64_t experts = 4 * P + 2 * P * H + 8 * E + 2 * P * I + 2 * P * H + 2 * S * K;
  EXPECT_EQ(saved(c, SavedOp::kFfMM), router + experts);
}

// The oracle's Qwen3-MoE layer (hidden 256, 8 experts) at 256 tokens. (At Qwen3-30B-A3B's size and so
// few tokens the experts' weight gradients, which the peak rule counts toward finding the moment,
// put the fused layer's moment in the experts' backward, where it still holds their activations;
// from 1024 tokens on it holds less there too.)
TEST(FusedDerivation, TheFusedLayerKeepsAndHoldsLessWithTheSameParameters) {
  const ModelConfig plain = testing::oracle_config(testing::oracle_case("qwen3_moe_h256_s256"));
  ModelConfig npu = plain;
  npu.replacements = recipe();
  const LayerCensus a = census_layer(plain, 0, 256), b = census_layer(npu, 0, 256);
  EXPECT_LT(b.saved_bytes, a.saved_bytes);
  EXPECT_LT(b.working_bytes, a.working_bytes);
  // rstd (4 bytes a row) in place of the fp32 upcast and the bf16 normalized rows.
  EXPECT_LT(saved(b, SavedOp::kNormOp), saved(a, SavedOp::kNormOp));
  EXPECT_GT(saved(b, SavedOp::kSoftmax), 0);
  EXPECT_GT(saved(b, SavedOp::kAttBMM), 0);
  const SelectiveCensus sa = census_selective(plain, 0, 256), sb = census_selective(npu, 0, 256);
  EXPECT_LT(sb.kept_bytes, sa.kept_bytes);
  EXPECT_LT(sb.working_bytes, sa.working_bytes);
  // A fused module holds what it replaced: parameters (by part) and the final norm unchanged.
  EXPECT_EQ(census_parameters(npu, 0).parts, census_parameters(plain, 0).parts);
  EXPECT_EQ(census_parameters(npu, 0).final_norm, census_parameters(plain, 0).final_norm);
  // The output layer's final norm is replaced too (model.norm): it keeps its input and rstd only.
  EXPECT_LT(census_output(npu, 256, npu.vocab_size).saved_bytes, census_output(plain, 256, plain.vocab_size).saved_bytes);
  // FLOPs and the recompute shares stay Transformers' own modules', as the reference prices them.
  EXPECT_EQ(census_recomputed(npu, 0, 256).ffn_mm, census_recomputed(plain, 0, 256).ffn_mm);
}

TEST(FusedDerivation, PatternsSelectModulesByNameAndClass) {
  EXPECT_TRUE(fnmatch("model.layers.3.input_layernorm", "*.input_layernorm"));
  EXPECT_TRUE(fnmatch("model.norm", "model.norm"));
  EXPECT_FALSE(fnmatch("model.layers.3.self_attn.q_norm", "*.input_layernorm"));
  EXPECT_TRUE(fnmatch("model.layers.12.mlp.experts", "model.layers.1?.mlp.*"));
  const ModelConfig config = fused("qwen3-30b-a3b");
  // The recipe names Qwen3-MoE's classes: on a Mixtral layer nothing is replaced.
  ModelConfig mixtral = cli::resolve_model("mixtral-8x7b").take();
  const LayerCensus before = census_layer(mixtral, 0, 128);
  mixtral.replacements = config.replacements;
  EXPECT_EQ(census_layer(mixtral, 0, 128).saved_bytes, before.saved_bytes);
}

}  // namespace
}  // namespace census
