// Golden tests of the families with attention layers of their own against the torch-2 oracle, to the
// byte: every stage each case recorded (a stage the oracle could not run is listed in the case's
// `errors`).
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

// The case's config: these cases record the config class's fields under config.fields.
ModelConfig case_config(const nlohmann::json& oracle) {
  const nlohmann::json& config = oracle.at("config");
  auto read = read_config(config.contains("fields") ? config.at("fields") : config);
  if (!read) throw std::runtime_error(read.refusal().message());
  return read.take();
}

Case load(const std::string& name) {
  Case c{oracle_case(name), {}, 0, 0};
  c.config = case_config(c.oracle);
  c.layer = c.oracle.at("layer_index");
  c.seq = c.oracle.at("seq_length");
  return c;
}

// Whether the oracle failed to run `stage` (its reference method could not build it).
bool failed(const Case& c, const std::string& stage) {
  for (const auto& error : c.oracle.at("errors"))
    if (error.at("stage") == stage) return true;
  return false;
}

std::map<std::string, int64_t> present_ops(const LayerCensus& c) {
  std::map<std::string, int64_t> ops;
  for (size_t i = 0; i < kSavedOpCount; ++i)
    if (c.saved_by_op[i]) ops[std::string(saved_op_name(static_cast<SavedOp>(i)))] = c.saved_by_op[i];
  return ops;
}

class AttentionFamilyCase : public ::testing::TestWithParam<std::string> {};

TEST_P(AttentionFamilyCase, LayerSavedWorkingKeptAndSavedOpsAtTp1AndTp2) {
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
TEST_P(AttentionFamilyCase, ExplainListsTheStoragesTheOracleLists) {
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

TEST_P(AttentionFamilyCase, FlopsTrafficParameters) {
  const Case c = load(GetParam());
  // These cases record the FLOPs by part under flops.flops.
  const nlohmann::json& flops = c.oracle.at("flops");
  EXPECT_EQ(census_flops(c.config, c.layer, c.seq), (flops.contains("flops") ? flops.at("flops") : flops).get<PartCounts>());
  const LayerTraffic traffic = census_traffic(c.config, c.layer, c.seq);
  auto as_counts = [](const nlohmann::json& j) {
    PartCounts counts;
    for (const auto& [part, value] : j.items())
      if (value.is_number()) counts[part] = static_cast<int64_t>(value.get<double>());
    return counts;
  };
  EXPECT_EQ(traffic.moved, as_counts(c.oracle.at("traffic").at("moved")));
  EXPECT_EQ(traffic.parameter, as_counts(c.oracle.at("traffic").at("parameter")));
  EXPECT_EQ(traffic.launches, as_counts(c.oracle.at("traffic").at("launches")));
  const LayerParameters parameters = census_parameters(c.config, c.layer);
  EXPECT_EQ(parameters.parts, c.oracle.at("parameters").at("parts").get<PartCounts>());
  const nlohmann::json& final_norm = c.oracle.at("parameters").at("final_norm");
  // Null where the reference's method finds no input_layernorm to take it from (OLMo 3's post-norm
  // layers): Census counts the model's own norm, (H) weights.
  EXPECT_EQ(parameters.final_norm, final_norm.is_null() ? c.config.hidden_size : final_norm.get<int64_t>());
}

TEST_P(AttentionFamilyCase, SelectiveKeptWorkingAndShares) {
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

TEST_P(AttentionFamilyCase, ActivationsRecordOfTheLayersKind) {
  const Case c = load(GetParam());
  const std::string kind = layer_kind(c.config, c.layer);
  const nlohmann::json& expected = c.oracle.at("census_activations");
  for (const auto& [name, k] : census_activations(c.config, c.seq)) {
    if (name != kind) continue;
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
    return;
  }
  ADD_FAILURE() << "no record of kind " << kind;
}

// The output layer (final norm, LM head, loss), wherever the oracle could build it. (OLMo 3's the
// reference's method cannot build; the output census's derivation covers it.)
TEST_P(AttentionFamilyCase, OutputSavedWorkingAndRecord) {
  const Case c = load(GetParam());
  if (failed(c, "output_vocab")) {
    ASSERT_TRUE(failed(c, "output_half_vocab"));
    GTEST_SKIP() << "the oracle's method cannot build this family's output layer";
  }
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

// OLMo 3's output layer, which the oracle's method cannot build (it takes the final norm from the
// layer's input_layernorm), priced as the model builds it: model.norm is an Olmo3RMSNorm, the class of
// GPT-OSS's norm (the weight on the fp32 states), so at GPT-OSS's recorded hidden size, vocabulary and
// length the output layer is the one the oracle measured for GPT-OSS.
TEST(Olmo3Output, IsTheOutputLayerOfItsNormsClass) {
  for (const char* name : {"gpt_oss_h256_s64", "gpt_oss_h256_s128"}) {
    const nlohmann::json gpt_oss = oracle_case(name);
    const Case olmo3 = load("olmo3_h256_s64_sliding_attention0");
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
