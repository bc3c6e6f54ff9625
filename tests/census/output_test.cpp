// The output layer (final norm, LM head, causal-LM loss): the oracle's cases to the byte, and its
// per-token split derived by hand.
#include <gtest/gtest.h>

#include "census/output_census.h"
#include "census/parts.h"
#include "cli/request.h"
#include "oracle_cases.h"

namespace census {
namespace {

using testing::oracle_case;
using testing::oracle_config;

class OutputOracleCase : public ::testing::TestWithParam<std::string> {};

TEST_P(OutputOracleCase, SavedWorkingAndRecord) {
  const nlohmann::json oracle = oracle_case(GetParam());
  const ModelConfig config = oracle_config(oracle);
  const int64_t seq = oracle.at("seq_length");
  for (const char* key : {"output_vocab", "output_half_vocab"}) {
    const nlohmann::json& expected = oracle.at(key);
    const OutputCensus c = census_output(config, seq, expected.at("vocab_size").get<int64_t>());
    EXPECT_EQ(c.saved_bytes, expected.at("saved_bytes").get<int64_t>()) << key;
    EXPECT_EQ(c.working_bytes, expected.at("peak_backward_bytes").get<int64_t>()) << key;
    EXPECT_EQ(c.kept_bytes, expected.at("kept_bytes").get<int64_t>()) << key;
  }
  const KindActivations record = census_output_activations(config, seq);
  const nlohmann::json& expected = oracle.at("census_output_activations");
  EXPECT_EQ(record.saved, expected.at("saved").get<double>());
  EXPECT_EQ(record.saved_tp, expected.at("saved_tp").get<double>());
  EXPECT_EQ(record.working, expected.at("working").get<double>());
  EXPECT_EQ(record.working_tp, expected.at("working_tp").get<double>());
}

INSTANTIATE_TEST_SUITE_P(DenseFamilies, OutputOracleCase,
                         ::testing::Values("llama_h256_s64", "llama_h256_s128", "llama_h256_s256",
                                           "mistral_h256_s128", "qwen2_h256_s128", "qwen3_h256_s64",
                                           "qwen3_h256_s256", "gemma_h256_s128", "gemma2_h256_s64",
                                           "gemma3_h256_s256"));

// The MoE families' final norms: Llama's, and GPT-OSS's (the weight on the fp32 states).
INSTANTIATE_TEST_SUITE_P(MoeFamilies, OutputOracleCase,
                         ::testing::Values("qwen3_moe_h256_s128", "qwen2_moe_h256_s64", "mixtral_h256_s256",
                                           "deepseek_v3_h256_s128_moe1", "gpt_oss_h256_s64", "gpt_oss_h256_s128",
                                           "gpt_oss_h256_s256"));

// The sparse-attention families' final norm: DeepSeek-V3's RMSNorm.
INSTANTIATE_TEST_SUITE_P(SparseAttentionFamilies, OutputOracleCase,
                         ::testing::Values("deepseek_v32_h256_s64_dense0", "deepseek_v32_h256_s128_moe1",
                                           "glm_moe_dsa_h256_s64_dense_full0", "glm_moe_dsa_h256_s128_moe_full1",
                                           // GLM-5's shared-indexer layer: it cannot run alone, but the
                                           // oracle measured the model's output layer beside it.
                                           "glm_moe_dsa_h256_s64_moe_shared2", "glm_moe_dsa_h256_s128_moe_shared2"));

// A layer that reads an earlier layer's selection still has parameters of its own, which the oracle
// counted without running it: GLM-5's shared-indexer layer 2 (no indexer of its own).
TEST(SharedLayerParameters, GlmMoeDsaSharedIndexerLayer) {
  for (const char* name : {"glm_moe_dsa_h256_s64_moe_shared2", "glm_moe_dsa_h256_s128_moe_shared2"}) {
    const nlohmann::json oracle = oracle_case(name);
    const LayerParameters got = census_parameters(oracle_config(oracle), oracle.at("layer_index").get<int64_t>());
    EXPECT_EQ(got.parts, oracle.at("parameters").at("parts").get<PartCounts>()) << name;
    EXPECT_EQ(got.final_norm, oracle.at("parameters").at("final_norm").get<int64_t>()) << name;
  }
}

// Per token and per vocabulary entry V, what halving the vocabulary splits:
//   saved_tp = 4 V: the loss keeps the fp32 log-softmax of the logits, (S, V) fp32, for its backward
//     (log_softmax and nll_loss both save that one storage).
//   working_tp = 12 V: the backward peaks in log_softmax's backward, holding the saved log-softmax,
//     the (S, V) fp32 gradient nll_loss's backward made, and the (S, V) fp32 gradient it makes.
// The rest of the layer (the norm, the head's input, the labels) does not grow with V. (At short
// sequences the peak moves to the head's backward, where its 2 H bytes of weight gradient per entry
// count toward finding the moment: the rule holds where 12 S outweighs them, as here.)
TEST(OutputDerivation, VocabularySplitIsFourAndTwelveBytesPerEntry) {
  for (const char* name : {"llama-3.1-8b", "qwen3-8b", "mistral-7b-v0.3"}) {
    const ModelConfig config = cli::resolve_model(name).take();
    const KindActivations record = census_output_activations(config, 8192);
    EXPECT_EQ(record.saved_tp, 4.0 * config.vocab_size) << name;
    EXPECT_EQ(record.working_tp, 12.0 * config.vocab_size) << name;
  }
}

}  // namespace
}  // namespace census
