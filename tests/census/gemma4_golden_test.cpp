// Gemma 4 against the torch-2 oracle, to the byte: a sliding layer (0, head_dim 32) and a full layer
// (1, global head_dim 64, proportional rotary) in every stage the oracle recorded, and the four-layer
// stack whose last two layers share the keys and values of the first two (num_kv_shared_layers 2).
#include <gtest/gtest.h>

#include "census/activations.h"
#include "census/layer_census.h"
#include "census/selective_census.h"
#include "oracle_stages.h"

namespace census {
namespace {

using testing::oracle_case;
using testing::oracle_config;

class Gemma4Case : public ::testing::TestWithParam<std::string> {};
ORACLE_LAYER_STAGES(Gemma4Case)

INSTANTIATE_TEST_SUITE_P(Gemma4, Gemma4Case,
                         ::testing::Values("gemma4_h256_s64_sliding_attention0", "gemma4_h256_s128_sliding_attention0",
                                           "gemma4_h256_s64_full_attention1", "gemma4_h256_s128_full_attention1"));

// The stack cases' kept and held bytes per layer and their kinds' records: tests/census/stack_golden_test.cpp.
class Gemma4StackCase : public ::testing::TestWithParam<std::string> {};

// The kinds are the oracle's: each layer's attention type, "+kv_shared" on the last two.
TEST_P(Gemma4StackCase, KindsAndWhichLayersRunAlone) {
  const nlohmann::json oracle = oracle_case(GetParam());
  const ModelConfig config = oracle_config(oracle);
  EXPECT_EQ(layer_kinds(config), oracle.at("layer_kinds").get<std::vector<std::string>>());
  for (int64_t i = 0; i < config.num_hidden_layers; ++i)
    EXPECT_EQ(config.family->stack_only(config, i) != nullptr, i >= 2) << i;
}

// The layers that run alone are what the oracle's single-layer census measured on them in the stack's
// config; the KV-shared ones it could not run (their shared_kv_states entry missing).
TEST_P(Gemma4StackCase, SingleLayerCensusOfTheKindsThatRunAlone) {
  const nlohmann::json oracle = oracle_case(GetParam());
  const ModelConfig config = oracle_config(oracle);
  const int64_t seq = oracle.at("seq_length");
  for (const auto& [kind, e] : oracle.at("single_layer_census").items()) {
    const int64_t layer = e.at("layer");
    if (e.contains("error")) {
      EXPECT_NE(config.family->stack_only(config, layer), nullptr) << kind;
      continue;
    }
    const LayerCensus got = census_layer(config, layer, seq);
    EXPECT_EQ(got.saved_bytes, e.at("saved_bytes").get<int64_t>()) << kind;
    EXPECT_EQ(got.working_bytes, e.at("peak_backward_bytes").get<int64_t>()) << kind;
    EXPECT_EQ(got.kept_bytes, e.at("kept_bytes").get<int64_t>()) << kind;
    EXPECT_EQ(testing::present_saved_ops(got), (e.at("saved_ops").get<std::map<std::string, int64_t>>())) << kind;
  }
}

// activations on the stack's config: the kinds that run alone censused alone (with their selective
// part), the KV-shared kinds from the stack, as the stack case's records state them.
TEST_P(Gemma4StackCase, ActivationsPricesTheSharedKindsThroughTheStack) {
  const nlohmann::json oracle = oracle_case(GetParam());
  const ModelConfig config = oracle_config(oracle);
  const int64_t seq = oracle.at("seq_length");
  const auto kinds = census_activations(config, seq);
  ASSERT_EQ(kinds.size(), 4u);
  for (const auto& [kind, record] : kinds) {
    const bool shared = kind.ends_with("+kv_shared");
    EXPECT_EQ(record.selective.has_value(), !shared) << kind;
    if (!shared) continue;
    const nlohmann::json& e = oracle.at("census_activations").at(kind);
    EXPECT_EQ(record.saved, e.at("saved").get<double>()) << kind;
    EXPECT_EQ(record.saved_tp, e.at("saved_tp").get<double>()) << kind;
    EXPECT_EQ(record.working, e.at("working").get<double>()) << kind;
    EXPECT_EQ(record.working_tp, e.at("working_tp").get<double>()) << kind;
  }
}

INSTANTIATE_TEST_SUITE_P(Gemma4, Gemma4StackCase, ::testing::Values("gemma4_stack_h256_s64", "gemma4_stack_h256_s128"));

}  // namespace
}  // namespace census
