// Every stage an oracle case records, checked to the byte against the census: a single-layer case's
// layer census at TP 1 and TP 2 (saved, working, kept, saved by op), its saved storages (explain), FLOPs,
// traffic and parameters, the selective census and recompute shares, the activations record of its
// layer's kind and the output layer; a stack case's kept and held bytes per layer at TP 1 and TP 2 and
// its kinds' records. The cases are those scripts/oracle_case.py and oracle_stack_case.py copy.
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
#include "census/stack_census.h"
#include "oracle_cases.h"

namespace census::testing {

inline std::map<std::string, int64_t> present_saved_ops(const LayerCensus& c) {
  std::map<std::string, int64_t> ops;
  for (size_t i = 0; i < kSavedOpCount; ++i)
    if (c.saved_by_op[i]) ops[std::string(saved_op_name(static_cast<SavedOp>(i)))] = c.saved_by_op[i];
  return ops;
}

inline int64_t case_layer(const nlohmann::json& oracle) { return oracle.at("layer_index").get<int64_t>(); }
inline int64_t case_seq(const nlohmann::json& oracle) { return oracle.at("seq_length").get<int64_t>(); }

// census_layer and census_layer_tp2: saved, working (the backward's peak), kept and saved by op.
inline void expect_layer_census(const nlohmann::json& oracle, const ModelConfig& config) {
  for (const auto& [tp, key] : {std::pair{1, "census_layer"}, std::pair{2, "census_layer_tp2"}}) {
    const LayerCensus got = census_layer(tp_config(config, tp), case_layer(oracle), case_seq(oracle));
    const nlohmann::json& expected = oracle.at(key);
    EXPECT_EQ(got.saved_bytes, expected.at("saved_bytes").get<int64_t>()) << "TP " << tp;
    EXPECT_EQ(got.working_bytes, expected.at("peak_backward_bytes").get<int64_t>()) << "TP " << tp;
    EXPECT_EQ(got.kept_bytes, expected.at("kept_bytes").get<int64_t>()) << "TP " << tp;
    EXPECT_EQ(present_saved_ops(got), (expected.at("saved_ops").get<std::map<std::string, int64_t>>())) << "TP " << tp;
  }
}

// Every storage the oracle lists as saved (saved_tensors), with its bytes, dtype, shape, module and op class.
inline void expect_saved_tensors(const nlohmann::json& oracle, const ModelConfig& config) {
  const LayerCensus got = census_layer(config, case_layer(oracle), case_seq(oracle), /*explain=*/true);
  std::multiset<std::string> ours, theirs;
  for (const SavedRow& row : got.saved)
    ours.insert(std::to_string(row.bytes) + " " + row.dtype + " " + row.shape.str() + " " + row.module + " " + row.op_class);
  for (const auto& t : oracle.at("saved_tensors")) {
    Dims shape;
    for (int64_t d : t.at("shape")) shape.push_back(d);
    theirs.insert(std::to_string(t.at("bytes").get<int64_t>()) + " " + t.at("dtype").get<std::string>() + " " +
                  shape.str() + " " + t.at("module").get<std::string>() + " " + t.at("op").get<std::string>());
  }
  EXPECT_EQ(ours, theirs);
}

// FLOPs, traffic (bytes moved, parameter bytes, launches) by part, and parameters by part with the final norm.
inline void expect_flops_traffic_parameters(const nlohmann::json& oracle, const ModelConfig& config) {
  const int64_t layer = case_layer(oracle), seq = case_seq(oracle);
  EXPECT_EQ(census_flops(config, layer, seq), oracle.at("flops").get<PartCounts>());
  const LayerTraffic traffic = census_traffic(config, layer, seq);
  // The oracle stores traffic as floats; every value is an integer.
  auto as_counts = [](const nlohmann::json& j) {
    PartCounts counts;
    for (const auto& [part, value] : j.items()) counts[part] = static_cast<int64_t>(value.get<double>());
    return counts;
  };
  EXPECT_EQ(traffic.moved, as_counts(oracle.at("traffic").at("moved")));
  EXPECT_EQ(traffic.parameter, as_counts(oracle.at("traffic").at("parameter")));
  EXPECT_EQ(traffic.launches, as_counts(oracle.at("traffic").at("launches")));
  const LayerParameters parameters = census_parameters(config, layer);
  EXPECT_EQ(parameters.parts, oracle.at("parameters").at("parts").get<PartCounts>());
  EXPECT_EQ(parameters.final_norm, oracle.at("parameters").at("final_norm").get<int64_t>());
}

// selective_tp1 / selective_tp2 (kept, the backward's peak with the recompute) and the recompute shares.
inline void expect_selective(const nlohmann::json& oracle, const ModelConfig& config) {
  const int64_t layer = case_layer(oracle), seq = case_seq(oracle);
  for (const auto& [tp, key] : {std::pair{1, "selective_tp1"}, std::pair{2, "selective_tp2"}}) {
    const SelectiveCensus got = census_selective(tp_config(config, tp), layer, seq);
    EXPECT_EQ(got.kept_bytes, oracle.at(key).at("kept_bytes").get<int64_t>()) << "TP " << tp;
    EXPECT_EQ(got.working_bytes, oracle.at(key).at("peak_backward_bytes").get<int64_t>()) << "TP " << tp;
  }
  const RecomputeShares shares = census_recomputed(config, layer, seq);
  EXPECT_EQ(shares.attention_mm, oracle.at("recomputed").at("attention_mm_share").get<double>());
  EXPECT_EQ(shares.ffn_mm, oracle.at("recomputed").at("ffn_mm_share").get<double>());
}

// census_activations: the record of the case's layer's kind, every field.
inline void expect_activations_record(const nlohmann::json& oracle, const ModelConfig& config) {
  const std::string kind = layer_kind(config, case_layer(oracle));
  const auto kinds = census_activations(config, case_seq(oracle));
  const auto found = std::find_if(kinds.begin(), kinds.end(), [&](const auto& each) { return each.first == kind; });
  ASSERT_NE(found, kinds.end()) << kind;
  const KindActivations& k = found->second;
  const nlohmann::json& expected = oracle.at("census_activations");
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

// output_vocab, output_half_vocab and census_output_activations.
inline void expect_output(const nlohmann::json& oracle, const ModelConfig& config) {
  const int64_t seq = case_seq(oracle);
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

// A stack case: census_stack_tp1 / _tp2 (each layer's kept and held) and each kind's record of
// census_activations (the mean of its layers, split), matched by the kind of its first layer.
inline void expect_stack(const nlohmann::json& oracle, const ModelConfig& config) {
  const int64_t seq = case_seq(oracle);
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
  const auto kinds = stack_activations(config, seq);
  const nlohmann::json& expected = oracle.at("census_activations");
  ASSERT_EQ(kinds.size(), expected.size());
  for (const auto& [oracle_kind, e] : expected.items()) {
    const std::string kind = layer_kind(config, e.at("layers")[0].get<int64_t>());
    const auto found = std::find_if(kinds.begin(), kinds.end(), [&](const auto& each) { return each.first == kind; });
    ASSERT_NE(found, kinds.end()) << oracle_kind;
    EXPECT_EQ(found->second.saved, e.at("saved").get<double>()) << kind;
    EXPECT_EQ(found->second.saved_tp, e.at("saved_tp").get<double>()) << kind;
    EXPECT_EQ(found->second.working, e.at("working").get<double>()) << kind;
    EXPECT_EQ(found->second.working_tp, e.at("working_tp").get<double>()) << kind;
    EXPECT_EQ(found->second.seq_length, e.at("seq_length").get<int64_t>()) << kind;
    EXPECT_FALSE(found->second.selective.has_value()) << kind;
  }
}

}  // namespace census::testing
