// The torch-2 oracle's stages of one layer case, each checked to the byte the same way for every
// family: the layer census at TP 1 and 2 (saved, the backward's peak, kept, saved bytes by op class),
// the storages `explain` lists, FLOPs, traffic and parameters, the selective census and the recompute
// shares, the `activations` record of the case's layer kind, and the output layer.
//
// A family's golden test loads its cases and instantiates ORACLE_LAYER_STAGES(Fixture) over them;
// what differs between families (a gated delta rule's backend, a stage the reference's method could
// not run) is read from the case itself.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "census/activations.h"
#include "census/layer_census.h"
#include "census/output_census.h"
#include "census/parts.h"
#include "census/selective_census.h"
#include "nn/gated_delta_rule.h"
#include "oracle_cases.h"

namespace census::testing {

struct OracleLayerCase {
  nlohmann::json oracle;
  ModelConfig config;
  int64_t layer = 0;
  int64_t seq = 0;
};

// The case, its config as recorded (in either round's form), and the gated delta rule's backend the
// case ran.
inline OracleLayerCase load_layer_case(const std::string& name) {
  OracleLayerCase c{oracle_case(name), {}};
  c.config = oracle_config(c.oracle);
  c.layer = c.oracle.at("layer_index");
  c.seq = c.oracle.at("seq_length");
  if (c.oracle.contains("gdn_backend") && c.oracle.at("gdn_backend").is_string())
    c.config.gdn_backend = *nn::parse_gdn_backend(c.oracle.at("gdn_backend").get<std::string>());
  return c;
}

// Whether the oracle could not run `stage` (the case lists it under `errors`).
inline bool oracle_failed(const nlohmann::json& oracle, const std::string& stage) {
  if (!oracle.contains("errors")) return false;
  for (const auto& error : oracle.at("errors"))
    if (error.at("stage") == stage) return true;
  return false;
}

inline std::map<std::string, int64_t> present_saved_ops(const LayerCensus& c) {
  std::map<std::string, int64_t> ops;
  for (size_t i = 0; i < kSavedOpCount; ++i)
    if (c.saved_by_op[i]) ops[std::string(saved_op_name(static_cast<SavedOp>(i)))] = c.saved_by_op[i];
  return ops;
}

// The oracle stores traffic as floats (every value an integer), beside a few labels that are not counts.
inline PartCounts oracle_counts(const nlohmann::json& j) {
  PartCounts counts;
  for (const auto& [part, value] : j.items())
    if (value.is_number()) counts[part] = static_cast<int64_t>(value.get<double>());
  return counts;
}

inline void expect_layer_census_at_tp1_and_tp2(const OracleLayerCase& c) {
  for (const auto& [tp, key] : {std::pair{1, "census_layer"}, std::pair{2, "census_layer_tp2"}}) {
    const LayerCensus got = census_layer(tp_config(c.config, tp), c.layer, c.seq);
    const nlohmann::json& expected = c.oracle.at(key);
    EXPECT_EQ(got.saved_bytes, expected.at("saved_bytes").get<int64_t>()) << "TP " << tp;
    EXPECT_EQ(got.working_bytes, expected.at("peak_backward_bytes").get<int64_t>()) << "TP " << tp;
    EXPECT_EQ(got.kept_bytes, expected.at("kept_bytes").get<int64_t>()) << "TP " << tp;
    EXPECT_EQ(present_saved_ops(got), (expected.at("saved_ops").get<std::map<std::string, int64_t>>())) << "TP " << tp;
  }
}

// The storages the oracle lists as saved: the first round beside the census, the second inside
// census_layer; the earliest cases at 64 and 256 tokens list none.
inline const nlohmann::json* oracle_saved_tensors(const nlohmann::json& oracle) {
  if (oracle.contains("saved_tensors")) return &oracle.at("saved_tensors");
  const nlohmann::json& layer = oracle.at("census_layer");
  return layer.contains("saved_tensors") ? &layer.at("saved_tensors") : nullptr;
}

// Every storage the oracle lists, with its bytes, dtype, shape, module and op class; largest first.
inline void expect_explain_lists_the_oracles_storages(const OracleLayerCase& c) {
  const nlohmann::json* listed = oracle_saved_tensors(c.oracle);
  if (listed == nullptr) GTEST_SKIP() << "the case lists no saved storages";
  const LayerCensus got = census_layer(c.config, c.layer, c.seq, /*explain=*/true);
  std::multiset<std::string> ours, theirs;
  for (const SavedRow& row : got.saved)
    ours.insert(std::to_string(row.bytes) + " " + row.dtype + " " + row.shape.str() + " " + row.module + " " + row.op_class);
  for (const auto& t : *listed) {
    Dims shape;
    for (int64_t d : t.at("shape")) shape.push_back(d);
    theirs.insert(std::to_string(t.at("bytes").get<int64_t>()) + " " + t.at("dtype").get<std::string>() + " " +
                  shape.str() + " " + t.at("module").get<std::string>() + " " + t.at("op").get<std::string>());
  }
  EXPECT_EQ(ours, theirs);
  for (size_t i = 1; i < got.saved.size(); ++i) EXPECT_GE(got.saved[i - 1].bytes, got.saved[i].bytes);
}

inline void expect_flops_traffic_parameters(const OracleLayerCase& c) {
  EXPECT_EQ(census_flops(c.config, c.layer, c.seq), oracle_flops(c.oracle).get<PartCounts>());
  const LayerTraffic traffic = census_traffic(c.config, c.layer, c.seq);
  EXPECT_EQ(traffic.moved, oracle_counts(c.oracle.at("traffic").at("moved")));
  EXPECT_EQ(traffic.parameter, oracle_counts(c.oracle.at("traffic").at("parameter")));
  EXPECT_EQ(traffic.launches, oracle_counts(c.oracle.at("traffic").at("launches")));
  const LayerParameters parameters = census_parameters(c.config, c.layer);
  EXPECT_EQ(parameters.parts, c.oracle.at("parameters").at("parts").get<PartCounts>());
  const nlohmann::json& final_norm = c.oracle.at("parameters").at("final_norm");
  // Null where the reference's method finds no input_layernorm to take the final norm from (OLMo 3's
  // post-norm layers, Nemotron-H's blocks): Census counts the model's own norm, (H) weights.
  EXPECT_EQ(parameters.final_norm, final_norm.is_null() ? c.config.hidden_size : final_norm.get<int64_t>());
}

inline void expect_selective_and_recompute_shares(const OracleLayerCase& c) {
  for (const auto& [tp, key] : {std::pair{1, "selective_tp1"}, std::pair{2, "selective_tp2"}}) {
    const SelectiveCensus got = census_selective(tp_config(c.config, tp), c.layer, c.seq);
    EXPECT_EQ(got.kept_bytes, c.oracle.at(key).at("kept_bytes").get<int64_t>()) << "TP " << tp;
    EXPECT_EQ(got.working_bytes, c.oracle.at(key).at("peak_backward_bytes").get<int64_t>()) << "TP " << tp;
  }
  const RecomputeShares shares = census_recomputed(c.config, c.layer, c.seq);
  EXPECT_EQ(shares.attention_mm, c.oracle.at("recomputed").at("attention_mm_share").get<double>());
  EXPECT_EQ(shares.ffn_mm, c.oracle.at("recomputed").at("ffn_mm_share").get<double>());
}

// The record `census activations` gives the case's layer kind.
inline void expect_activations_record(const OracleLayerCase& c) {
  const std::string kind = layer_kind(c.config, c.layer);
  const auto kinds = census_activations(c.config, c.seq);
  const auto found = std::find_if(kinds.begin(), kinds.end(), [&](const auto& each) { return each.first == kind; });
  ASSERT_NE(found, kinds.end()) << "no record of kind " << kind;
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
// and its per-token record, where the oracle's method could build it.
inline void expect_output_layer(const nlohmann::json& oracle, const ModelConfig& config, int64_t seq) {
  if (oracle_failed(oracle, "output_vocab")) {
    ASSERT_TRUE(oracle_failed(oracle, "output_half_vocab"));
    GTEST_SKIP() << "the oracle's method cannot build this family's output layer";
  }
  if (!oracle.contains("output_vocab")) GTEST_SKIP() << "the case records no output layer (the oracle's first round)";
  for (const char* key : {"output_vocab", "output_half_vocab"}) {
    const nlohmann::json& expected = oracle.at(key);
    const OutputCensus got = census_output(config, seq, expected.at("vocab_size").get<int64_t>());
    EXPECT_EQ(got.saved_bytes, expected.at("saved_bytes").get<int64_t>()) << key;
    EXPECT_EQ(got.working_bytes, expected.at("peak_backward_bytes").get<int64_t>()) << key;
    EXPECT_EQ(got.kept_bytes, expected.at("kept_bytes").get<int64_t>()) << key;
  }
  const KindActivations record = census_output_activations(config, seq);
  const nlohmann::json& expected = oracle.at("census_output_activations");
  EXPECT_EQ(record.saved, expected.at("saved").get<double>());
  EXPECT_EQ(record.saved_tp, expected.at("saved_tp").get<double>());
  EXPECT_EQ(record.working, expected.at("working").get<double>());
  EXPECT_EQ(record.working_tp, expected.at("working_tp").get<double>());
}

}  // namespace census::testing

// Every stage of the layer cases a suite is instantiated over:
//   class MoeFamilyCase : public ::testing::TestWithParam<std::string> {};
//   ORACLE_LAYER_STAGES(MoeFamilyCase)
//   INSTANTIATE_TEST_SUITE_P(Glm4Moe, MoeFamilyCase, ::testing::Values("glm4_moe_h256_s64_dense0", ...));
#define ORACLE_LAYER_STAGES(Fixture)                                                                   \
  TEST_P(Fixture, LayerSavedWorkingKeptAndSavedOpsAtTp1AndTp2) {                                       \
    ::census::testing::expect_layer_census_at_tp1_and_tp2(::census::testing::load_layer_case(GetParam())); \
  }                                                                                                    \
  TEST_P(Fixture, ExplainListsTheStoragesTheOracleLists) {                                             \
    ::census::testing::expect_explain_lists_the_oracles_storages(                                      \
        ::census::testing::load_layer_case(GetParam()));                                               \
  }                                                                                                    \
  TEST_P(Fixture, FlopsTrafficParameters) {                                                            \
    ::census::testing::expect_flops_traffic_parameters(::census::testing::load_layer_case(GetParam()));  \
  }                                                                                                    \
  TEST_P(Fixture, SelectiveKeptWorkingAndShares) {                                                     \
    ::census::testing::expect_selective_and_recompute_shares(                                          \
        ::census::testing::load_layer_case(GetParam()));                                               \
  }                                                                                                    \
  TEST_P(Fixture, ActivationsRecordOfTheLayersKind) {                                                  \
    ::census::testing::expect_activations_record(::census::testing::load_layer_case(GetParam()));      \
  }                                                                                                    \
  TEST_P(Fixture, OutputSavedWorkingAndRecord) {                                                       \
    const ::census::testing::OracleLayerCase c = ::census::testing::load_layer_case(GetParam());       \
    ::census::testing::expect_output_layer(c.oracle, c.config, c.seq);                                 \
  }
