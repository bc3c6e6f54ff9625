// One rank's training step against the step oracle (torch 2 + Transformers 5 on fake tensors, every
// storage tracked over the whole step), copied into tests/data/step/: the Llama and Qwen3-MoE toys
// (hidden 256, 8 heads, 2 KV heads, head_dim 32, vocab 4096, 4 layers; Qwen3-MoE 8 experts top-2 of
// width 256) at 128 and 256 tokens, for each kind the oracle runs: one micro-batch, 4 accumulated, 4
// then AdamW, every stage of 2- and 4-stage 1F1B pipelines at 4 and 8 micro-batches, selective and full
// checkpointing. Every number to the byte.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "step/step_census.h"
#include "models/registry.h"
#include "step_record_expect.h"

namespace census {
namespace {

using testing::expect_moment;
using testing::expect_split;
using testing::expect_totals;

nlohmann::json step_case(const std::string& name) {
  std::ifstream file(std::string(CENSUS_TEST_DATA) + "/step/" + name + ".json");
  return nlohmann::json::parse(file);
}

std::vector<std::string> step_case_names() {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(CENSUS_TEST_DATA) + "/step"))
    if (entry.is_regular_file()) names.push_back(entry.path().stem().string());  // parallel/ is its own test's
  std::sort(names.begin(), names.end());
  return names;
}

StepOptions options_of(const nlohmann::json& oracle) {
  StepOptions o;
  o.seq_length = oracle.at("seq");
  o.micro_batches = oracle.at("m");
  o.pipeline_stages = oracle.at("p");
  o.stage = oracle.at("r");
  const std::string kind = oracle.at("kind");
  if (kind == "accum_adamw") o.optimizer = StepOptimizer::kAdamW;
  if (kind == "sac_selective") o.recompute = Recompute::kSelective;
  if (kind == "ac_full") o.recompute = Recompute::kFull;
  return o;
}

class StepOracleCase : public ::testing::TestWithParam<std::string> {};

TEST_P(StepOracleCase, EveryNumberToTheByte) {
  const nlohmann::json oracle = step_case(GetParam());
  auto config = read_config(oracle.at("config"));
  ASSERT_TRUE(config) << config.refusal().message();
  auto step = census_step(*config, options_of(oracle));
  ASSERT_TRUE(step) << step.refusal().message();
  const StepAnalysis& a = step->analysis;

  expect_totals(*step, oracle);

  const auto& peak = oracle.at("peak");
  EXPECT_EQ(a.peak.bytes, peak.at("bytes").get<int64_t>());
  EXPECT_EQ(a.peak.phase, peak.at("phase").get<std::string>());
  EXPECT_EQ(a.peak.op, peak.at("op").get<std::string>());
  expect_split(a.peak.split, peak.at("split"), "peak");
  const auto& other = oracle.at("other_peak");
  EXPECT_EQ(a.other_peak.bytes, other.at("bytes").get<int64_t>());
  EXPECT_EQ(a.other_peak.phase, other.at("phase").get<std::string>());
  EXPECT_EQ(a.other_peak.op, other.at("op").get<std::string>());
  expect_moment(step->forward_peak, oracle.at("forward_peak"), "forward_peak");
  expect_moment(step->backward_peak, oracle.at("backward_peak"), "backward_peak");
  expect_moment(step->optimizer_step_peak, oracle.at("optimizer_step_peak"), "optimizer_step_peak");

  const auto& phases = oracle.at("phases");
  ASSERT_EQ(a.phases.size(), phases.size());
  for (size_t i = 0; i < phases.size(); ++i) {
    const std::string name = phases[i].at("name");
    EXPECT_EQ(a.phases[i].name, name);
    EXPECT_EQ(a.phases[i].live_at_start, phases[i].at("live_at_start").get<int64_t>()) << name;
    EXPECT_EQ(a.phases[i].peak.bytes, phases[i].at("peak_bytes").get<int64_t>()) << name;
    EXPECT_EQ(a.phases[i].live_at_end, phases[i].at("live_at_end").get<int64_t>()) << name;
  }
}

// The Llama-3-8B shape with 2 layers at 8192 tokens (hidden 4096, 32 heads, 8 KV heads, head_dim 128,
// intermediate 14336, vocab 128256): the step oracle's README states its fake-tensor peaks,
// 19,310,846,472 B for one micro-batch and 22,284,648,968 B at B1 for 4 accumulated then AdamW, and
// its 1,486,901,248 parameters.
TEST(StepOracle, Llama3_8bShapeTwoLayersAt8192Tokens) {
  auto config = read_config(nlohmann::json{{"model_type", "llama"}, {"hidden_size", 4096}, {"num_attention_heads", 32},
                                           {"num_key_value_heads", 8}, {"head_dim", 128}, {"intermediate_size", 14336},
                                           {"num_hidden_layers", 2}, {"vocab_size", 128256},
                                           {"max_position_embeddings", 8192}});
  ASSERT_TRUE(config);
  StepOptions single;
  single.seq_length = 8192;
  auto one = census_step(*config, single);
  ASSERT_TRUE(one);
  EXPECT_EQ(one->parameter_count, 1'486'901'248);
  EXPECT_EQ(one->analysis.peak.bytes, 19'310'846'472);
  StepOptions accumulated = single;
  accumulated.micro_batches = 4;
  accumulated.optimizer = StepOptimizer::kAdamW;
  auto four = census_step(*config, accumulated);
  ASSERT_TRUE(four);
  EXPECT_EQ(four->analysis.peak.bytes, 22'284'648'968);
  EXPECT_EQ(four->analysis.peak.phase, "B1");
}

INSTANTIATE_TEST_SUITE_P(Oracle, StepOracleCase, ::testing::ValuesIn(step_case_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace census
