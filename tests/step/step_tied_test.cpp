// An LM head tied to the embedding (tie_word_embeddings), derived by hand from the Llama toy's step
// (hidden 256, vocab 4096, 4 layers, 128 tokens), whose untied numbers the step oracle fixes
// (tests/data/step/llama_toy_L4_s128_single and _accum_m4_adamw):
//
//   parameters   one weight for both: 4,327,680 - 4096 x 256 = 3,279,104 in 38 tensors (39 untied),
//                P = 6,558,208 B; model.parameters() lists it once, first (embed_tokens.weight)
//   one micro-batch, no optimizer
//     F0's peak  the untied 19,558,544 less the head's 2,097,152 bf16 weight: 17,461,392
//     B0's peak  at the loss's _log_softmax_backward_data, before any gradient: 20,605,064 - 2,097,152
//     B0's end   P + one .grad of P (the head's and the embedding's gradients summed before it becomes
//                the shared weight's .grad) + 128 (rotary buffers) = 13,116,544
//   4 micro-batches, AdamW
//     optimizer_step's peak  P + G (= P) + the states, 2 P + 38 x 4 (fp32 steps), + 128, + the
//                embedding's update, first in the order, its sqrt and quotient (2 x 2,097,152) with no
//                earlier parameter's denom alive: 30,427,416
//   a pipeline's last stage holds the head as its own parameter (the copy Megatron shares), as untied.
#include <gtest/gtest.h>

#include "step/step_census.h"
#include "models/registry.h"

namespace census {
namespace {

ModelConfig toy(bool tied) {
  auto config = read_config(nlohmann::json{{"model_type", "llama"}, {"hidden_size", 256}, {"num_attention_heads", 8},
                                           {"num_key_value_heads", 2}, {"head_dim", 32}, {"intermediate_size", 512},
                                           {"num_hidden_layers", 4}, {"vocab_size", 4096},
                                           {"max_position_embeddings", 8192}, {"tie_word_embeddings", tied}});
  if (!config) throw std::runtime_error(config.refusal().message());
  return config.take();
}

StepCensus run(StepOptions o, bool tied = true) {
  o.seq_length = 128;
  auto step = census_step(toy(tied), o);
  if (!step) throw std::runtime_error(step.refusal().message());
  return step.take();
}

constexpr int64_t kP = 6'558'208, kHeadWeight = 2'097'152;

TEST(StepTiedHead, OneMicroBatchHoldsOneWeightAndOneGradient) {
  StepOptions o;
  const StepCensus s = run(o);
  EXPECT_EQ(s.parameter_count, 3'279'104);
  EXPECT_EQ(s.parameter_tensors, 38);
  EXPECT_EQ(s.parameter_bytes, kP);
  EXPECT_EQ(s.analysis.phases[1].peak.bytes, 19'558'544 - kHeadWeight);
  EXPECT_EQ(s.analysis.peak.bytes, 20'605'064 - kHeadWeight);
  EXPECT_EQ(s.analysis.peak.phase, "B0");
  EXPECT_EQ(s.analysis.peak.op, "aten._log_softmax_backward_data.default");
  EXPECT_EQ(s.analysis.phases[2].live_at_end, kP + kP + 128);
  EXPECT_EQ(s.gradient_bytes_after_last_backward, kP);
}

TEST(StepTiedHead, TheOptimizerStepUpdatesTheSharedWeightFirst) {
  StepOptions o;
  o.micro_batches = 4;
  o.optimizer = StepOptimizer::kAdamW;
  o.first_step = true;  // the first step, its for-loop AdamW, as the step oracle ran it
  o.optimizer_impl = nn::OptimizerImpl::kForLoop;
  const StepCensus s = run(o);
  EXPECT_EQ(s.optimizer_state_bytes, 2 * kP + 38 * 4);
  EXPECT_EQ(s.analysis.peak.bytes, kP + kP + (2 * kP + 38 * 4) + 128 + 2 * kHeadWeight);
  EXPECT_EQ(s.analysis.peak.phase, "optimizer_step");
}

TEST(StepTiedHead, APipelinesLastStageHoldsItsOwnHead) {
  StepOptions o;
  o.micro_batches = 2;
  o.pipeline_stages = 2;
  o.stage = 1;
  const StepCensus untied = run(o, /*tied=*/false);
  const StepCensus tied = run(o);
  EXPECT_EQ(tied.parameter_count, untied.parameter_count);
  EXPECT_EQ(tied.analysis.peak.bytes, untied.analysis.peak.bytes);
}

}  // namespace
}  // namespace census
