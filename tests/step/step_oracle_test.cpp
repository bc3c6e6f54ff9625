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
#include "step_record_expect.h"

namespace census {
namespace {

using testing::expect_step_case;
using testing::options_of;
using testing::step_case;
using testing::step_case_names;

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
  expect_step_case(*step, oracle);
}

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
  accumulated.first_step = true;  // the first step, its for-loop AdamW, as the step oracle ran it
  accumulated.optimizer_impl = nn::OptimizerImpl::kForLoop;
  auto four = census_step(*config, accumulated);
  ASSERT_TRUE(four);
  EXPECT_EQ(four->analysis.peak.bytes, 22'284'648'968);
  EXPECT_EQ(four->analysis.peak.phase, "B1");
}

INSTANTIATE_TEST_SUITE_P(Oracle, StepOracleCase, ::testing::ValuesIn(step_case_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace census
