// The step a run is judged by, against the steady-state oracle (oracle/step/steady/: the step oracle's
// model and AdamW run for two steps on fake tensors, the second recorded), copied into
// tests/data/step/steady/ by scripts/oracle_step_case.py: eight families' 4-layer toys at 128 tokens, one
// micro-batch, four accumulated and two sequences a micro-batch, with the for-loop AdamW
// (foreach=False, fused=False), and one micro-batch with the foreach AdamW (PyTorch's default on CUDA);
// four of them again at 1,000 tokens, one micro-batch, both forms.
// Each case is there twice: step 2 (`*_steady`, census step's default) and step 1 (`*_first`, census step
// --first-step). Every number to the byte.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "models/registry.h"
#include "step/step_census.h"
#include "step_cases.h"
#include "step_record_expect.h"

namespace census {
namespace {

using testing::expect_step_case;
using testing::options_of;
using testing::step_case;
using testing::step_case_names;

constexpr const char* kFolder = "step/steady";

class StepSteadyOracleCase : public ::testing::TestWithParam<std::string> {};

TEST_P(StepSteadyOracleCase, EveryNumberToTheByte) {
  const nlohmann::json oracle = step_case(GetParam(), kFolder);
  auto config = read_config(oracle.at("config"));
  ASSERT_TRUE(config) << config.refusal().message();
  if (testing::liger_kind(oracle.at("kind"))) config->liger.rms_norm = config->liger.swiglu = config->liger.rope = true;
  if (oracle.contains("error")) {
    // torchtune's offloading asserted at step 2's first forward (a node its backward never ran left a save
    // in the tracker): Census refuses the step, naming the offloading.
    auto refused = census_step(*config, options_of(oracle));
    ASSERT_FALSE(refused) << oracle.at("error");
    EXPECT_EQ(refused.refusal().message().rfind("--offload-activations torchtune: ", 0), 0u)
        << refused.refusal().message();
    return;
  }
  auto step = census_step(*config, options_of(oracle));
  ASSERT_TRUE(step) << step.refusal().message();
  expect_step_case(*step, oracle);
}

INSTANTIATE_TEST_SUITE_P(Oracle, StepSteadyOracleCase, ::testing::ValuesIn(step_case_names(kFolder)),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

ModelConfig toy(const std::string& family) {
  auto config = read_config(step_case(family + "_toy_L4_s128_single_adamw_steady", kFolder).at("config"));
  if (!config) throw std::runtime_error(config.refusal().message());
  return config.take();
}

StepCensus run(const ModelConfig& config, const StepOptions& o) { return testing::step_or_throw(config, o); }

StepOptions adamw(nn::OptimizerImpl impl, bool first_step) {
  StepOptions o;
  o.seq_length = 128;
  o.optimizer = StepOptimizer::kAdamW;
  o.optimizer_impl = impl;
  o.first_step = first_step;
  return o;
}

// The Llama toy: 39 bf16 parameters, 4,327,680 elements, P = 8,655,360 B; AdamW's states 2 P and a 4 B
// step count a parameter, S = 17,310,720 + 156 = 17,310,876 B; its two rotary buffers 128 B.
constexpr int64_t kP = 8'655'360, kS = 2 * kP + 39 * 4, kBuffers = 128;
// Step 1's forward peaks at the loss's nll_loss_forward with 19,558,544 B live: the parameters, the
// buffers, the inputs and the forward's activations (the step oracle's single case).
constexpr int64_t kStep1ForwardPeak = 19'558'544;

// In the steady state the states are live before the forward: the setup ends with P + S + buffers, and
// every forward and backward moment holds S more than step 1's.
TEST(StepSteady, TheStatesAreAliveFromTheStart) {
  const StepCensus s = run(toy("llama"), adamw(nn::OptimizerImpl::kForLoop, false));
  EXPECT_EQ(s.analysis.phases[0].name, "setup");
  EXPECT_EQ(s.analysis.phases[0].live_at_end, kP + kS + kBuffers);
  EXPECT_EQ(s.forward_peak.bytes, kStep1ForwardPeak + kS);  // 36,869,420
  EXPECT_EQ(s.forward_peak.split.optimizer_states(), kS);
  const StepCensus first = run(toy("llama"), adamw(nn::OptimizerImpl::kForLoop, true));
  EXPECT_EQ(first.forward_peak.bytes, kStep1ForwardPeak);
  EXPECT_EQ(first.analysis.phases[0].live_at_end, kP + kBuffers);
  EXPECT_EQ(s.optimizer_state_bytes, first.optimizer_state_bytes);
}

// The for-loop's update holds one parameter's sqrt and quotient at once, and the previous parameter's
// denom: its most is at the head's [4096, 256] weight, 2 x 2,097,152 B, beside the final norm's [256]
// denom, 512 B; then P + gradients P + S + buffers are live. The foreach form makes every exp_avg_sq's
// sqrt at once in one list: 4,327,680 bf16 elements, P more. Both steps reach the same optimizer-step
// moment: the states are live there either way.
TEST(StepSteady, TheForeachUpdateHoldsEveryParametersSqrtAtOnce) {
  const int64_t start = kP + kP + kS + kBuffers;  // 34,621,724
  const StepCensus loop = run(toy("llama"), adamw(nn::OptimizerImpl::kForLoop, false));
  EXPECT_EQ(loop.optimizer_step_peak.bytes, start + 2 * 2'097'152 + 512);  // 38,816,540
  EXPECT_EQ(loop.analysis.peak.op, "aten.div.Tensor");
  const StepCensus foreach = run(toy("llama"), adamw(nn::OptimizerImpl::kForEach, false));
  EXPECT_EQ(foreach.optimizer_step_peak.bytes, start + kP);  // 43,277,084
  EXPECT_EQ(foreach.analysis.peak.op, "aten._foreach_sqrt.default");
  EXPECT_EQ(run(toy("llama"), adamw(nn::OptimizerImpl::kForEach, true)).optimizer_step_peak.bytes, start + kP);
}

// GPT-OSS's attention sinks reach the flash stand-in nowhere: the backward gives those 4 parameters no
// gradient, step 1's AdamW gives them no state, and step 2 starts without one. 71 parameters of 18,163,328 B,
// 67 with states: 2 x 18,163,264 + 67 x 4 = 36,326,796 B.
TEST(StepSteady, AParameterWithoutAGradientHasNoState) {
  const StepCensus s = run(toy("gpt_oss"), adamw(nn::OptimizerImpl::kForLoop, false));
  EXPECT_EQ(s.parameter_tensors, 71);
  EXPECT_EQ(s.optimizer_state_bytes, 2 * 18'163'264 + 67 * 4);
  EXPECT_EQ(s.analysis.phases[0].live_at_end, 18'163'328 + 128 + 36'326'796);
  EXPECT_EQ(s.analysis.phases[0].peak.bytes, 18'163'328 + 128 + 36'326'796);
}

}  // namespace
}  // namespace census
