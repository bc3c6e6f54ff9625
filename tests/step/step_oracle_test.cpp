// One rank's training step against the step oracle (torch 2 + Transformers 5 on fake tensors, every
// storage tracked over the whole step), copied into tests/data/step/ by scripts/oracle_step_case.py:
// the Llama and Qwen3-MoE toys (hidden 256, 8 heads, 2 KV heads, head_dim 32, vocab 4096, 4 layers;
// Qwen3-MoE 8 experts top-2 of width 256) at 128 and 256 tokens, for each kind the oracle runs: one
// micro-batch, 4 accumulated, 4 then AdamW, every stage of 2- and 4-stage 1F1B pipelines at 4 and 8
// micro-batches, selective and full checkpointing; and every other family's toy (the torch-2 oracle's,
// 4 layers, 128 tokens) as one sequence, two sequences a micro-batch, 4 accumulated then AdamW, the two
// stages of a 2-stage pipeline, selective and full checkpointing. Every number to the byte. Where the
// oracle could not cut a family's model into stages, Census refuses the pipeline.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "step/step_census.h"
#include "models/registry.h"
#include "step_cases.h"

namespace census {
namespace {

using testing::options_of;
using testing::step_case;
using testing::step_case_names;

void expect_split(const StepSplit& split, const nlohmann::json& expected, const std::string& where) {
  EXPECT_EQ(split.parameters(), expected.at("parameters").get<int64_t>()) << where;
  EXPECT_EQ(split.gradients(), expected.at("gradients").get<int64_t>()) << where;
  EXPECT_EQ(split.optimizer_states(), expected.at("optimizer_states").get<int64_t>()) << where;
  EXPECT_EQ(split.other(), expected.at("other").get<int64_t>()) << where;
  const auto& detail = expected.at("other_detail");
  EXPECT_EQ(split[StepCategory::kBuffers], detail.at("buffers").get<int64_t>()) << where;
  EXPECT_EQ(split[StepCategory::kInputs], detail.at("inputs").get<int64_t>()) << where;
  EXPECT_EQ(split[StepCategory::kParamGradInflight], detail.at("param_grad_inflight").get<int64_t>()) << where;
  EXPECT_EQ(split[StepCategory::kActivations], detail.at("activations").get<int64_t>()) << where;
}

void expect_moment(const StepMoment& moment, const nlohmann::json& expected, const std::string& what) {
  if (expected.is_null()) {
    EXPECT_EQ(moment.bytes, -1) << what;
    return;
  }
  EXPECT_EQ(moment.bytes, expected.at("bytes").get<int64_t>()) << what;
  EXPECT_EQ(moment.phase, expected.at("phase").get<std::string>()) << what;
}

class StepOracleCase : public ::testing::TestWithParam<std::string> {};

TEST_P(StepOracleCase, EveryNumberToTheByte) {
  const nlohmann::json oracle = step_case(GetParam());
  auto config = read_config(oracle.at("config"));
  ASSERT_TRUE(config) << config.refusal().message();
  if (oracle.contains("error")) {
    // The oracle could not cut this family's model into the case's stages (its error says why): Census
    // refuses the same option, naming the pipeline.
    auto refused = census_step(*config, options_of(oracle));
    ASSERT_FALSE(refused) << oracle.at("error");
    EXPECT_NE(refused.refusal().message().find("--pp"), std::string::npos) << refused.refusal().message();
    return;
  }
  auto step = census_step(*config, options_of(oracle));
  ASSERT_TRUE(step) << step.refusal().message();
  const StepAnalysis& a = step->analysis;

  std::vector<std::string> schedule = oracle.at("schedule");
  EXPECT_EQ(step->schedule, schedule);
  EXPECT_EQ(step->parameter_count, oracle.at("parameters").at("count").get<int64_t>());
  EXPECT_EQ(step->parameter_tensors, oracle.at("parameters").at("tensors").get<int64_t>());
  EXPECT_EQ(step->parameter_bytes, oracle.at("parameters").at("bytes").get<int64_t>());
  EXPECT_EQ(step->buffer_bytes, oracle.at("parameters").at("buffers_bytes").get<int64_t>());
  const auto& grads = oracle.at("gradients");
  EXPECT_EQ(step->gradient_bytes_after_first_backward, grads.at("bytes_after_first_backward").get<int64_t>());
  EXPECT_EQ(step->gradient_bytes_after_last_backward, grads.at("bytes_after_last_backward").get<int64_t>());
  EXPECT_EQ(step->gradient_bytes_at_end, grads.at("bytes_live_at_end").get<int64_t>());
  if (!oracle.at("optimizer").is_null()) {
    EXPECT_EQ(step->optimizer_state_bytes, oracle.at("optimizer").at("state_bytes").get<int64_t>());
  }

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
