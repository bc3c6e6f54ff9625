// Golden tests of the later MoE families (GLM-4.5, GLM-4.7-Flash, Qwen3-VL-MoE's text tower,
// MiniMax-M2, ERNIE-4.5-MoE, Hunyuan-MoE) against the torch-2 oracle's recorded cases, to the byte:
// every stage a case recorded (scripts/oracle_case.py copied the numbers into tests/data/oracle/).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "census/activations.h"
#include "census/layer_census.h"
#include "census/output_census.h"
#include "census/parts.h"
#include "census/selective_census.h"
#include "oracle_cases.h"

namespace census {
namespace {

using testing::oracle_case;
using testing::oracle_config;

struct Case {
  nlohmann::json oracle;
  ModelConfig config;
  int64_t layer = 0;
  int64_t seq = 0;
};

Case load(const std::string& name) {
  Case c{oracle_case(name), {}};
  c.config = oracle_config(c.oracle);
  c.layer = c.oracle.at("layer_index");
  c.seq = c.oracle.at("seq_length");
  return c;
}

std::map<std::string, int64_t> present_ops(const LayerCensus& c) {
  std::map<std::string, int64_t> ops;
  for (size_t i = 0; i < kSavedOpCount; ++i)
    if (c.saved_by_op[i]) ops[std::string(saved_op_name(static_cast<SavedOp>(i)))] = c.saved_by_op[i];
  return ops;
}

PartCounts as_counts(const nlohmann::json& j) {
  PartCounts counts;  // the oracle stores traffic as floats; every value is an integer
  for (const auto& [part, value] : j.items()) counts[part] = static_cast<int64_t>(value.get<double>());
  return counts;
}

class MoeFamilyCase : public ::testing::TestWithParam<std::string> {};

TEST_P(MoeFamilyCase, LayerSavedWorkingKeptAndSavedOpsAtTp1AndTp2) {
  const Case c = load(GetParam());
  for (const auto& [tp, key] : {std::pair{1, "census_layer"}, std::pair{2, "census_layer_tp2"}}) {
    const LayerCensus got = census_layer(tp_config(c.config, tp), c.layer, c.seq);
    const nlohmann::json& expected = c.oracle.at(key);
    EXPECT_EQ(got.saved_bytes, expected.at("saved_bytes").get<int64_t>()) << "TP " << tp;
    EXPECT_EQ(got.working_bytes, expected.at("peak_backward_bytes").get<int64_t>()) << "TP " << tp;
    EXPECT_EQ(got.kept_bytes, expected.at("kept_bytes").get<int64_t>()) << "TP " << tp;
    EXPECT_EQ(present_ops(got), (expected.at("saved_ops").get<std::map<std::string, int64_t>>())) << "TP " << tp;
  }
}

// Every storage the oracle lists as saved, with its bytes, dtype, shape, module and op class.
TEST_P(MoeFamilyCase, ExplainListsTheStoragesTheOracleLists) {
  const Case c = load(GetParam());
  const LayerCensus got = census_layer(c.config, c.layer, c.seq, /*explain=*/true);
  std::multiset<std::string> ours, theirs;
  for (const SavedRow& row : got.saved)
    ours.insert(std::to_string(row.bytes) + " " + row.dtype + " " + row.shape.str() + " " + row.module + " " + row.op_class);
  for (const auto& t : c.oracle.at("saved_tensors")) {
    Dims shape;
    for (int64_t d : t.at("shape")) shape.push_back(d);
    theirs.insert(std::to_string(t.at("bytes").get<int64_t>()) + " " + t.at("dtype").get<std::string>() + " " +
                  shape.str() + " " + t.at("module").get<std::string>() + " " + t.at("op").get<std::string>());
  }
  EXPECT_EQ(ours, theirs);
}

TEST_P(MoeFamilyCase, FlopsTrafficParameters) {
  const Case c = load(GetParam());
  EXPECT_EQ(census_flops(c.config, c.layer, c.seq), c.oracle.at("flops").get<PartCounts>());
  const LayerTraffic traffic = census_traffic(c.config, c.layer, c.seq);
  EXPECT_EQ(traffic.moved, as_counts(c.oracle.at("traffic").at("moved")));
  EXPECT_EQ(traffic.parameter, as_counts(c.oracle.at("traffic").at("parameter")));
  EXPECT_EQ(traffic.launches, as_counts(c.oracle.at("traffic").at("launches")));
  const LayerParameters parameters = census_parameters(c.config, c.layer);
  EXPECT_EQ(parameters.parts, c.oracle.at("parameters").at("parts").get<PartCounts>());
  EXPECT_EQ(parameters.final_norm, c.oracle.at("parameters").at("final_norm").get<int64_t>());
}

TEST_P(MoeFamilyCase, SelectiveKeptWorkingAndShares) {
  const Case c = load(GetParam());
  for (const auto& [tp, key] : {std::pair{1, "selective_tp1"}, std::pair{2, "selective_tp2"}}) {
    const SelectiveCensus got = census_selective(tp_config(c.config, tp), c.layer, c.seq);
    EXPECT_EQ(got.kept_bytes, c.oracle.at(key).at("kept_bytes").get<int64_t>()) << "TP " << tp;
    EXPECT_EQ(got.working_bytes, c.oracle.at(key).at("peak_backward_bytes").get<int64_t>()) << "TP " << tp;
  }
  const RecomputeShares shares = census_recomputed(c.config, c.layer, c.seq);
  EXPECT_EQ(shares.attention_mm, c.oracle.at("recomputed").at("attention_mm_share").get<double>());
  EXPECT_EQ(shares.ffn_mm, c.oracle.at("recomputed").at("ffn_mm_share").get<double>());
}

// The record of the case's layer kind, as `census activations` gives it.
TEST_P(MoeFamilyCase, ActivationsRecord) {
  const Case c = load(GetParam());
  const std::string kind = layer_kind(c.config, c.layer);
  const auto kinds = census_activations(c.config, c.seq);
  const auto found = std::find_if(kinds.begin(), kinds.end(), [&](const auto& each) { return each.first == kind; });
  ASSERT_NE(found, kinds.end()) << kind;
  const KindActivations& k = found->second;
  const nlohmann::json& expected = c.oracle.at("census_activations");
  EXPECT_EQ(k.saved, expected.at("saved").get<double>());
  EXPECT_EQ(k.saved_tp, expected.at("saved_tp").get<double>());
  EXPECT_EQ(k.working, expected.at("working").get<double>());
  EXPECT_EQ(k.working_tp, expected.at("working_tp").get<double>());
  EXPECT_EQ(k.seq_length, expected.at("seq_length").get<int64_t>());
  EXPECT_EQ(k.ops, (expected.at("ops").get<std::map<std::string, double>>()));
  EXPECT_EQ(k.ops_tp, (expected.at("ops_tp").get<std::map<std::string, double>>()));
  EXPECT_EQ(k.selective, expected.at("selective").get<double>());
  EXPECT_EQ(k.selective_tp, expected.at("selective_tp").get<double>());
  EXPECT_EQ(k.selective_attention_mm, expected.at("selective_attention_mm").get<double>());
  EXPECT_EQ(k.selective_ffn_mm, expected.at("selective_ffn_mm").get<double>());
}

// The output layer (the family's final norm, the LM head, the loss) at the full and half vocabulary,
// and its per-token record.
TEST_P(MoeFamilyCase, OutputSavedWorkingAndRecord) {
  const Case c = load(GetParam());
  for (const char* key : {"output_vocab", "output_half_vocab"}) {
    const nlohmann::json& expected = c.oracle.at(key);
    const OutputCensus got = census_output(c.config, c.seq, expected.at("vocab_size").get<int64_t>());
    EXPECT_EQ(got.saved_bytes, expected.at("saved_bytes").get<int64_t>()) << key;
    EXPECT_EQ(got.working_bytes, expected.at("peak_backward_bytes").get<int64_t>()) << key;
    EXPECT_EQ(got.kept_bytes, expected.at("kept_bytes").get<int64_t>()) << key;
  }
  const KindActivations record = census_output_activations(c.config, c.seq);
  const nlohmann::json& expected = c.oracle.at("census_output_activations");
  EXPECT_EQ(record.saved, expected.at("saved").get<double>());
  EXPECT_EQ(record.saved_tp, expected.at("saved_tp").get<double>());
  EXPECT_EQ(record.working, expected.at("working").get<double>());
  EXPECT_EQ(record.working_tp, expected.at("working_tp").get<double>());
}

// GLM-4.5 (Glm4MoeConfig, toy sizes): the dense layer 0 and the MoE layer 1.
INSTANTIATE_TEST_SUITE_P(Glm4Moe, MoeFamilyCase,
                         ::testing::Values("glm4_moe_h256_s64_dense0", "glm4_moe_h256_s64_moe1",
                                           "glm4_moe_h256_s128_dense0", "glm4_moe_h256_s128_moe1"));

// Qwen3-VL-MoE's text tower (Qwen3VLMoeTextConfig, toy sizes): a MoE layer.
INSTANTIATE_TEST_SUITE_P(Qwen3VlMoe, MoeFamilyCase, ::testing::Values("qwen3_vl_moe_h256_s64", "qwen3_vl_moe_h256_s128"));

// GLM-4.7-Flash (Glm4MoeLiteConfig, toy sizes): the dense layer 0 and the MoE layer 1.
INSTANTIATE_TEST_SUITE_P(Glm4MoeLite, MoeFamilyCase,
                         ::testing::Values("glm4_moe_lite_h256_s64_dense0", "glm4_moe_lite_h256_s64_moe1",
                                           "glm4_moe_lite_h256_s128_dense0", "glm4_moe_lite_h256_s128_moe1"));

// ERNIE-4.5-MoE (Ernie4_5_MoeConfig, toy sizes, two shared experts): the dense layer 0 and the MoE layer 1.
INSTANTIATE_TEST_SUITE_P(Ernie4_5_Moe, MoeFamilyCase,
                         ::testing::Values("ernie4_5_moe_h256_s64_dense0", "ernie4_5_moe_h256_s64_moe1",
                                           "ernie4_5_moe_h256_s128_dense0", "ernie4_5_moe_h256_s128_moe1"));

// MiniMax-M2 (MiniMaxM2Config, toy sizes): its TP-2 stage is the reference's half-width rank.
INSTANTIATE_TEST_SUITE_P(MiniMaxM2, MoeFamilyCase, ::testing::Values("minimax_m2_h256_s64", "minimax_m2_h256_s128"));

// Hunyuan-MoE (HunYuanMoEV1Config, toy sizes).
INSTANTIATE_TEST_SUITE_P(HunYuanMoEV1, MoeFamilyCase,
                         ::testing::Values("hunyuan_v1_moe_h256_s64", "hunyuan_v1_moe_h256_s128"));

}  // namespace
}  // namespace census
