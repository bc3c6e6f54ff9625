// The stack census against the oracle's stack cases: each layer's kept and held bytes at TP 1 and
// TP 2, to the byte, and each kind's record (the mean of its layers, split) exactly.
#include <gtest/gtest.h>

#include <algorithm>

#include "census/layer_census.h"
#include "census/stack_census.h"
#include "oracle_cases.h"

namespace census {
namespace {

using testing::oracle_case;
using testing::oracle_config;

class StackCase : public ::testing::TestWithParam<std::string> {};

TEST_P(StackCase, KeptAndHeldPerLayer) {
  const nlohmann::json oracle = oracle_case(GetParam());
  const ModelConfig config = oracle_config(oracle);
  const int64_t seq = oracle.at("seq_length");
  for (const auto& [tp, key] : {std::pair{1, "census_stack_tp1"}, std::pair{2, "census_stack_tp2"}}) {
    const std::vector<StackLayerCensus> stack = census_stack(tp_config(config, tp), seq);
    const auto kept = oracle.at(key).at("kept").get<std::vector<int64_t>>();
    const auto held = oracle.at(key).at("held").get<std::vector<int64_t>>();
    ASSERT_EQ(stack.size(), kept.size());
    for (size_t i = 0; i < stack.size(); ++i) {
      EXPECT_EQ(stack[i].kept, kept[i]) << "TP " << tp << " layer " << i;
      EXPECT_EQ(stack[i].held, held[i]) << "TP " << tp << " layer " << i;
    }
  }
}

TEST_P(StackCase, KindRecords) {
  const nlohmann::json oracle = oracle_case(GetParam());
  const ModelConfig config = oracle_config(oracle);
  const int64_t seq = oracle.at("seq_length");
  const auto kinds = stack_activations(config, seq);
  const nlohmann::json& expected = oracle.at("census_activations");
  ASSERT_EQ(kinds.size(), expected.size());
  // The oracle names its kinds its own way: a kind is matched by its first layer.
  for (const auto& [oracle_kind, e] : expected.items()) {
    const std::string kind = layer_kind(config, e.at("layers")[0].get<int64_t>());
    const auto found = std::find_if(kinds.begin(), kinds.end(), [&](const auto& each) { return each.first == kind; });
    ASSERT_NE(found, kinds.end()) << oracle_kind;
    const KindActivations& record = found->second;
    EXPECT_EQ(record.saved, e.at("saved").get<double>()) << kind;
    EXPECT_EQ(record.saved_tp, e.at("saved_tp").get<double>()) << kind;
    EXPECT_EQ(record.working, e.at("working").get<double>()) << kind;
    EXPECT_EQ(record.working_tp, e.at("working_tp").get<double>()) << kind;
    EXPECT_EQ(record.seq_length, e.at("seq_length").get<int64_t>()) << kind;
    EXPECT_FALSE(record.selective.has_value()) << kind;
  }
}

INSTANTIATE_TEST_SUITE_P(Stack, StackCase, ::testing::Values("llama_stack_h256_s64", "glm_moe_dsa_stack_h256_s64",
                                                           "deepseek_v4_stack_h256_s64", "deepseek_v4_stack_h256_s128",
                                                           "gemma4_stack_h256_s64", "gemma4_stack_h256_s128"));

// The control: a Llama stack's first layer keeps what the layer census saves, and every later layer
// less by the rotary cos and sin (1, S, D) bf16 each, which the model makes once and the first
// layer's forward saves first.
TEST(StackControl, LaterLayersKeepLessByTheRotary) {
  const ModelConfig config = oracle_config(oracle_case("llama_stack_h256_s64"));
  const int64_t seq = 64;
  const std::vector<StackLayerCensus> stack = census_stack(config, seq);
  const LayerCensus alone = census_layer(config, 0, seq);
  const int64_t cos_and_sin = 2 * seq * config.head_dim * 2;
  EXPECT_EQ(stack[0].kept, alone.saved_bytes);
  for (size_t i = 1; i < stack.size(); ++i) EXPECT_EQ(stack[i].kept, alone.saved_bytes - cos_and_sin) << i;
}

}  // namespace
}  // namespace census

namespace census {
namespace {

// DeepSeek-V3.2's layers read nothing an earlier layer wrote: through the stack, each keeps what its
// layer census saves, the layers after the first less by the rotary cos and sin (1, S, Dr) bf16 each.
TEST(StackControl, DeepseekV32LayersKeepWhatTheyKeepAlone) {
  const ModelConfig config = testing::oracle_config(testing::oracle_case("deepseek_v32_h256_s64_dense0"));
  const int64_t seq = 64;
  const std::vector<StackLayerCensus> stack = census_stack(config, seq);
  ASSERT_EQ(stack.size(), 2u);
  const int64_t cos_and_sin = 2 * seq * config.mla.qk_rope_head_dim * 2;
  EXPECT_EQ(stack[0].kept, census_layer(config, 0, seq).saved_bytes);
  EXPECT_EQ(stack[1].kept, census_layer(config, 1, seq).saved_bytes - cos_and_sin);
}

}  // namespace
}  // namespace census
