// Golden tests of the families with attention layers of their own against the torch-2 oracle, to the
// byte: every stage each case recorded (a stage the oracle could not run is listed in the case's
// `errors`).
#include <gtest/gtest.h>

#include "oracle_stages.h"

namespace census {
namespace {

using testing::oracle_case;

class AttentionFamilyCase : public ::testing::TestWithParam<std::string> {};
ORACLE_LAYER_STAGES(AttentionFamilyCase)

// OLMo 3's output layer, which the oracle's method cannot build (it takes the final norm from the
// layer's input_layernorm), priced as the model builds it: model.norm is an Olmo3RMSNorm, the class of
// GPT-OSS's norm (the weight on the fp32 states), so at GPT-OSS's recorded hidden size, vocabulary and
// length the output layer is the one the oracle measured for GPT-OSS.
TEST(Olmo3Output, IsTheOutputLayerOfItsNormsClass) {
  for (const char* name : {"gpt_oss_h256_s64", "gpt_oss_h256_s128"}) {
    const nlohmann::json gpt_oss = oracle_case(name);
    const testing::OracleLayerCase olmo3 = testing::load_layer_case("olmo3_h256_s64_sliding_attention0");
    ASSERT_EQ(olmo3.config.hidden_size, gpt_oss.at("config").at("hidden_size").get<int64_t>());
    const int64_t seq = gpt_oss.at("seq_length");
    for (const char* key : {"output_vocab", "output_half_vocab"}) {
      const nlohmann::json& expected = gpt_oss.at(key);
      const OutputCensus got = census_output(olmo3.config, seq, expected.at("vocab_size").get<int64_t>());
      EXPECT_EQ(got.saved_bytes, expected.at("saved_bytes").get<int64_t>()) << name << " " << key;
      EXPECT_EQ(got.working_bytes, expected.at("peak_backward_bytes").get<int64_t>()) << name << " " << key;
      EXPECT_EQ(got.kept_bytes, expected.at("kept_bytes").get<int64_t>()) << name << " " << key;
    }
  }
}

// Seed-OSS: dropout 0.1 on both residual branches, its noise tensors kept.
INSTANTIATE_TEST_SUITE_P(SeedOss, AttentionFamilyCase, ::testing::Values("seed_oss_h256_s64", "seed_oss_h256_s128"));

// Phi-3: fused qkv_proj and gate_up_proj.
INSTANTIATE_TEST_SUITE_P(Phi3, AttentionFamilyCase, ::testing::Values("phi3_h256_s64", "phi3_h256_s128"));

// SmolLM3: a rotary layer (0) and a NoPE layer (3).
INSTANTIATE_TEST_SUITE_P(SmolLM3, AttentionFamilyCase,
                         ::testing::Values("smollm3_h256_s64_rope0", "smollm3_h256_s128_rope0", "smollm3_h256_s64_nope3",
                                           "smollm3_h256_s128_nope3"));

// OLMo 3: post-norm, full-width q/k norms, fp32 rotary; a sliding (0) and a full (1) layer.
INSTANTIATE_TEST_SUITE_P(Olmo3, AttentionFamilyCase,
                         ::testing::Values("olmo3_h256_s64_sliding_attention0", "olmo3_h256_s128_sliding_attention0",
                                           "olmo3_h256_s64_full_attention1", "olmo3_h256_s128_full_attention1"));

// MiMo-V2-Flash: a full dense layer (0), a sliding MoE layer (1: twice the KV heads, sinks), a full
// MoE layer (2).
INSTANTIATE_TEST_SUITE_P(MiMoV2Flash, AttentionFamilyCase,
                         ::testing::Values("mimo_v2_flash_h256_s64_full_dense0", "mimo_v2_flash_h256_s128_full_dense0",
                                           "mimo_v2_flash_h256_s64_sliding_moe1", "mimo_v2_flash_h256_s128_sliding_moe1",
                                           "mimo_v2_flash_h256_s64_full_moe2", "mimo_v2_flash_h256_s128_full_moe2"));

// Llama 4's text layers: a chunked (rotary, L2 q/k norm) layer 0 and a NoPE full layer 3 with the
// attention temperature, both MoE (top-2 of 8 here).
INSTANTIATE_TEST_SUITE_P(Llama4Text, AttentionFamilyCase,
                         ::testing::Values("llama4_h256_s64_chunked_attention0", "llama4_h256_s128_chunked_attention0",
                                           "llama4_h256_s64_full_attention3", "llama4_h256_s128_full_attention3"));

}  // namespace
}  // namespace census
