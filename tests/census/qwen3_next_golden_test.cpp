// Golden tests of Qwen3-Next's and Qwen3.5's layers against the torch-2 oracle, to the byte: the gated
// delta net in both backends (Transformers' eager chunked rule, and the kernel's contract) and the
// gated attention, with the MoE block as recorded, and with mlp_only_layers listing every layer so
// that each feed-forward is the dense Qwen3NextMLP; and Qwen3_5DecoderLayer as it is
// (scripts/oracle_case.py copied the numbers).
#include <gtest/gtest.h>

#include <set>

#include "census/activations.h"
#include "census/layer_census.h"
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
  int64_t layer;
  int64_t seq;
};

Case load(const std::string& name) {
  Case c{oracle_case(name), {}, 0, 0};
  c.config = oracle_config(c.oracle);
  c.layer = c.oracle.at("layer_index");
  c.seq = c.oracle.at("seq_length");
  if (c.oracle.at("gdn_backend").is_string())
    c.config.gdn_backend = *nn::parse_gdn_backend(c.oracle.at("gdn_backend").get<std::string>());
  return c;
}

std::map<std::string, int64_t> present_ops(const LayerCensus& c) {
  std::map<std::string, int64_t> ops;
  for (size_t i = 0; i < kSavedOpCount; ++i)
    if (c.saved_by_op[i]) ops[std::string(saved_op_name(static_cast<SavedOp>(i)))] = c.saved_by_op[i];
  return ops;
}

class Qwen3NextCase : public ::testing::TestWithParam<std::string> {};

TEST_P(Qwen3NextCase, LayerSavedWorkingKeptAndSavedOpsAtTp1AndTp2) {
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
TEST_P(Qwen3NextCase, ExplainListsTheStoragesTheOracleLists) {
  const Case c = load(GetParam());
  const LayerCensus got = census_layer(c.config, c.layer, c.seq, /*explain=*/true);
  std::multiset<std::string> ours, theirs;
  for (const SavedRow& row : got.saved)
    ours.insert(std::to_string(row.bytes) + " " + row.dtype + " " + row.shape.str() + " " + row.module + " " + row.op_class);
  // The first round lists them beside the census, the second inside census_layer.
  const nlohmann::json& listed =
      c.oracle.contains("saved_tensors") ? c.oracle.at("saved_tensors") : c.oracle.at("census_layer").at("saved_tensors");
  for (const auto& t : listed) {
    Dims shape;
    for (int64_t d : t.at("shape")) shape.push_back(d);
    theirs.insert(std::to_string(t.at("bytes").get<int64_t>()) + " " + t.at("dtype").get<std::string>() + " " +
                  shape.str() + " " + t.at("module").get<std::string>() + " " + t.at("op").get<std::string>());
  }
  EXPECT_EQ(ours, theirs);
}

TEST_P(Qwen3NextCase, FlopsTrafficParameters) {
  const Case c = load(GetParam());
  EXPECT_EQ(census_flops(c.config, c.layer, c.seq), testing::oracle_flops(c.oracle).get<PartCounts>());
  const LayerTraffic traffic = census_traffic(c.config, c.layer, c.seq);
  auto as_counts = [](const nlohmann::json& j) {
    PartCounts counts;
    for (const auto& [part, value] : j.items()) counts[part] = static_cast<int64_t>(value.get<double>());
    return counts;
  };
  EXPECT_EQ(traffic.moved, as_counts(c.oracle.at("traffic").at("moved")));
  EXPECT_EQ(traffic.parameter, as_counts(c.oracle.at("traffic").at("parameter")));
  EXPECT_EQ(traffic.launches, as_counts(c.oracle.at("traffic").at("launches")));
  const LayerParameters parameters = census_parameters(c.config, c.layer);
  EXPECT_EQ(parameters.parts, c.oracle.at("parameters").at("parts").get<PartCounts>());
  EXPECT_EQ(parameters.final_norm, c.oracle.at("parameters").at("final_norm").get<int64_t>());
}

TEST_P(Qwen3NextCase, SelectiveKeptWorkingAndShares) {
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

TEST_P(Qwen3NextCase, ActivationsRecordOfTheLayersKind) {
  const Case c = load(GetParam());
  const std::string kind = layer_kind(c.config, c.layer);
  const nlohmann::json& expected = c.oracle.at("census_activations");
  for (const auto& [name, k] : census_activations(c.config, c.seq)) {
    if (name != kind) continue;
    EXPECT_EQ(k.saved, expected.at("saved").get<double>());
    EXPECT_EQ(k.saved_tp, expected.at("saved_tp").get<double>());
    EXPECT_EQ(k.working, expected.at("working").get<double>());
    EXPECT_EQ(k.working_tp, expected.at("working_tp").get<double>());
    EXPECT_EQ(k.ops, (expected.at("ops").get<std::map<std::string, double>>()));
    EXPECT_EQ(k.ops_tp, (expected.at("ops_tp").get<std::map<std::string, double>>()));
    EXPECT_EQ(k.selective, expected.at("selective").get<double>());
    EXPECT_EQ(k.selective_tp, expected.at("selective_tp").get<double>());
    EXPECT_EQ(k.selective_attention_mm, expected.at("selective_attention_mm").get<double>());
    EXPECT_EQ(k.selective_ffn_mm, expected.at("selective_ffn_mm").get<double>());
    return;
  }
  ADD_FAILURE() << "no record of kind " << kind;
}

// The recorded cases, as the oracle ran them: every layer's feed-forward the MoE block (router,
// experts, sigmoid-gated shared expert).
INSTANTIATE_TEST_SUITE_P(
    Qwen3NextMoe, Qwen3NextCase,
    ::testing::Values("qwen3_next_h256_s64_linear_attention0_gdn-eager", "qwen3_next_h256_s128_linear_attention0_gdn-eager",
                      "qwen3_next_h256_s256_linear_attention0_gdn-eager", "qwen3_next_h256_s64_linear_attention0_gdn-triton",
                      "qwen3_next_h256_s128_linear_attention0_gdn-triton",
                      "qwen3_next_h256_s256_linear_attention0_gdn-triton",
                      // The same contract as the torch-2 oracle's second round names it.
                      "qwen3_next_h256_s64_linear_attention0_gdn-kernel", "qwen3_next_h256_s128_linear_attention0_gdn-kernel",
                      "qwen3_next_h256_s256_linear_attention0_gdn-kernel", "qwen3_next_h256_s64_full_attention1",
                      "qwen3_next_h256_s128_full_attention1", "qwen3_next_h256_s256_full_attention1",
                      // Qwen3.5-MoE's text layer (its delta net's four projections, the MoE block on
                      // every layer), measured here with the oracle's script.
                      "qwen3_5_moe_text_h256_s128_linear_attention0_gdn-eager",
                      "qwen3_5_moe_text_h256_s128_linear_attention0_gdn-triton",
                      "qwen3_5_moe_text_h256_s128_full_attention1"));

INSTANTIATE_TEST_SUITE_P(
    Qwen3NextDense, Qwen3NextCase,
    ::testing::Values("qwen3_next_dense_h256_s64_linear_attention0_gdn-eager",
                      "qwen3_next_dense_h256_s128_linear_attention0_gdn-eager",
                      "qwen3_next_dense_h256_s256_linear_attention0_gdn-eager",
                      "qwen3_next_dense_h256_s64_linear_attention0_gdn-triton",
                      "qwen3_next_dense_h256_s128_linear_attention0_gdn-triton",
                      "qwen3_next_dense_h256_s256_linear_attention0_gdn-triton",
                      "qwen3_next_dense_h256_s64_full_attention1", "qwen3_next_dense_h256_s128_full_attention1",
                      "qwen3_next_dense_h256_s256_full_attention1",
                      // 100 tokens pad to two chunks; one value head per key head (r = 1: q and k are views
                      // of the conv's output, not repeated); two key heads, one at TP 2 (v, z, b, a views).
                      "qwen3_next_dense_h256_s100_linear_attention0_gdn-eager",
                      "qwen3_next_dense_h256_s100_linear_attention0_gdn-triton",
                      "qwen3_next_dense_h256_s100_full_attention1",
                      "qwen3_next_dense_r1_h256_s100_linear_attention0_gdn-eager",
                      "qwen3_next_dense_r1_h256_s100_linear_attention0_gdn-triton",
                      "qwen3_next_dense_k2_h256_s100_linear_attention0_gdn-eager",
                      "qwen3_next_dense_k2_h256_s100_linear_attention0_gdn-triton",
                      // Qwen3.5's text layers: separate projections, always dense.
                      "qwen3_5_text_h256_s100_linear_attention0_gdn-eager",
                      "qwen3_5_text_h256_s100_linear_attention0_gdn-triton",
                      "qwen3_5_text_h256_s100_full_attention1"),
    [](const ::testing::TestParamInfo<std::string>& info) {
      std::string name = info.param;
      for (char& ch : name)
        if (ch == '-') ch = '_';
      return name;
    });

}  // namespace
}  // namespace census
