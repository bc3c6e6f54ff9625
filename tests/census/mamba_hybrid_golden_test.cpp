// Golden tests of the Mamba-2 hybrids against the torch-2 oracle, to the byte: Nemotron-H's four
// block types (the Mamba-2 mixer as Transformers' torch path runs it, the attention without rotary,
// the relu² MLP, the MoE), as the oracle recorded them (scripts/oracle_case.py copied the numbers).
#include <gtest/gtest.h>

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

struct Case {
  nlohmann::json oracle;
  ModelConfig config;
  int64_t layer;
  int64_t seq;
};

Case load(const std::string& name) {
  Case c{oracle_case(name), {}, 0, 0};
  // These cases record the config as {built_by, model_type, class, fields}: the config.json is `fields`.
  auto config = read_config(c.oracle.at("config").at("fields"));
  if (!config) throw std::runtime_error(config.refusal().message());
  c.config = config.take();
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

class MambaHybridCase : public ::testing::TestWithParam<std::string> {};

TEST_P(MambaHybridCase, LayerSavedWorkingKeptAndSavedOpsAtTp1AndTp2) {
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
TEST_P(MambaHybridCase, ExplainListsTheStoragesTheOracleLists) {
  const Case c = load(GetParam());
  const LayerCensus got = census_layer(c.config, c.layer, c.seq, /*explain=*/true);
  std::multiset<std::string> ours, theirs;
  for (const SavedRow& row : got.saved)
    ours.insert(std::to_string(row.bytes) + " " + row.dtype + " " + row.shape.str() + " " + row.module + " " + row.op_class);
  for (const auto& t : c.oracle.at("census_layer").at("saved_tensors")) {
    Dims shape;
    for (int64_t d : t.at("shape")) shape.push_back(d);
    theirs.insert(std::to_string(t.at("bytes").get<int64_t>()) + " " + t.at("dtype").get<std::string>() + " " +
                  shape.str() + " " + t.at("module").get<std::string>() + " " + t.at("op").get<std::string>());
  }
  EXPECT_EQ(ours, theirs);
}

TEST_P(MambaHybridCase, FlopsTrafficParameters) {
  const Case c = load(GetParam());
  EXPECT_EQ(census_flops(c.config, c.layer, c.seq), c.oracle.at("flops").at("flops").get<PartCounts>());
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
  // Nemotron-H's output norm is not found by the reference's method (no input_layernorm): null there.
  if (!c.oracle.at("parameters").at("final_norm").is_null()) {
    EXPECT_EQ(parameters.final_norm, c.oracle.at("parameters").at("final_norm").get<int64_t>());
  }
}

TEST_P(MambaHybridCase, SelectiveKeptWorkingAndShares) {
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

TEST_P(MambaHybridCase, ActivationsRecordOfTheLayersKind) {
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

// The output layer (final norm, LM head, loss), where the oracle could build it: not for Nemotron-H,
// whose block has no input_layernorm for the reference's method to take the final norm's class from.
class MambaHybridOutput : public ::testing::TestWithParam<std::string> {};

TEST_P(MambaHybridOutput, SavedWorkingKeptAndRecord) {
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

INSTANTIATE_TEST_SUITE_P(FalconH1, MambaHybridOutput, ::testing::Values("falcon_h1_h256_s64", "falcon_h1_h256_s128"));

INSTANTIATE_TEST_SUITE_P(GraniteMoeHybrid, MambaHybridOutput,
                         ::testing::Values("granitemoehybrid_h256_s64_mamba0", "granitemoehybrid_h256_s128_mamba0",
                                           "granitemoehybrid_h256_s64_attention1",
                                           "granitemoehybrid_h256_s128_attention1"));

INSTANTIATE_TEST_SUITE_P(NemotronH, MambaHybridCase,
                         ::testing::Values("nemotron_h_h256_s64_mamba0", "nemotron_h_h256_s128_mamba0",
                                           "nemotron_h_h256_s64_attention2", "nemotron_h_h256_s128_attention2",
                                           "nemotron_h_h256_s64_mlp3", "nemotron_h_h256_s128_mlp3",
                                           "nemotron_h_h256_s64_moe1", "nemotron_h_h256_s128_moe1"));

INSTANTIATE_TEST_SUITE_P(FalconH1, MambaHybridCase, ::testing::Values("falcon_h1_h256_s64", "falcon_h1_h256_s128"));

INSTANTIATE_TEST_SUITE_P(GraniteMoeHybrid, MambaHybridCase,
                         ::testing::Values("granitemoehybrid_h256_s64_mamba0", "granitemoehybrid_h256_s128_mamba0",
                                           "granitemoehybrid_h256_s64_attention1",
                                           "granitemoehybrid_h256_s128_attention1"));

}  // namespace
}  // namespace census
