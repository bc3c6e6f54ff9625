// Note [The step folds alike iterations] (step/step_census.cpp): the step runs a loop of alike
// iterations (the gated delta rule's chunks) as one standing iteration resized to the alike ones,
// and what it reports is the step run iteration by iteration (StepByStepGuard): the peak, each
// phase's peak and its split and op, the forward, backward and optimizer peaks, other_peak, what the
// peak holds by op, the gradients, the composed step. Only the event counts differ (the folded log has
// fewer). Every family with such a loop (Qwen3-Next's toy, Qwen3.5's and Qwen3.5-MoE's shipped configs
// cut to 4 layers), at 512 tokens (8 chunks of 64: chunk 1 stands for chunks 1 to 4), over recompute
// modes, two sequences a micro-batch, accumulation with AdamW, both stages of a 1F1B pipeline, and
// ZeRO-3 and fp32 master weights composed.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli/shipped_models.h"
#include "models/registry.h"
#include "ops/dispatch.h"
#include "step/step_census.h"
#include "step_cases.h"
#include "step_expect_same.h"

namespace census {
namespace {

ModelConfig read(const nlohmann::json& json) {
  auto config = read_config(json);
  if (!config) throw std::runtime_error(config.refusal().message());
  return config.take();
}

// A shipped Qwen3.5 config's text model cut to its first 4 layers (three linear attentions, one full).
ModelConfig shipped_four_layers(std::string_view name) {
  for (const cli::ShippedModel& model : cli::shipped_models()) {
    if (model.name != name) continue;
    nlohmann::json json = nlohmann::json::parse(model.json);
    nlohmann::json& text = json.at("text_config");
    text["num_hidden_layers"] = 4;
    text["layer_types"] = {"linear_attention", "linear_attention", "linear_attention", "full_attention"};
    return read(json);
  }
  throw std::runtime_error("no shipped model " + std::string(name));
}

// Runs the step folded and iteration by iteration and compares them; returns how many fewer events
// the folded step logged.
int64_t expect_folded_is_step_by_step(const ModelConfig& config, const StepOptions& o, const std::string& where) {
  auto folded = census_step(config, o);
  Result<StepCensus> by_step = [&] {
    const StepByStepGuard every_iteration;
    return census_step(config, o);
  }();
  if (!folded || !by_step) {
    ADD_FAILURE() << where << ": refused";
    return 0;
  }
  const StepCensus& a = *folded;
  const StepCensus& b = *by_step;
  EXPECT_EQ(a.passes_replayed, b.passes_replayed) << where;
  testing::expect_same_step_census(a, b, where, /*same_events=*/false);
  return b.analysis.events - a.analysis.events;
}

TEST(StepFolded, EqualsTheStepRunIterationByIteration) {
  const std::vector<std::pair<std::string, ModelConfig>> models = {
      {"qwen3_next", read(testing::step_case("qwen3_next_toy_L4_s128_single_b2").at("config"))},
      {"qwen3.5-0.8b", shipped_four_layers("qwen3.5-0.8b")},
      {"qwen3.5-35b-a3b", shipped_four_layers("qwen3.5-35b-a3b")},
  };
  for (const auto& [name, config] : models)
    for (const Recompute recompute : {Recompute::kNone, Recompute::kSelective, Recompute::kFull})
      for (const int64_t stages : {1, 2})
        for (int64_t stage = 0; stage < stages; ++stage) {
          StepOptions o;
          o.seq_length = 512;
          o.micro_batch_size = 2;
          o.micro_batches = stages == 1 ? 2 : 4;
          o.pipeline_stages = stages;
          o.stage = stage;
          o.recompute = recompute;
          o.optimizer = StepOptimizer::kAdamW;
          o.composition.data_parallel = 4;
          o.composition.zero = 3;
          o.composition.fp32_master_weights = true;
          const std::string where = name + " recompute " + std::to_string(static_cast<int>(recompute)) + " stage " +
                                    std::to_string(stage) + " of " + std::to_string(stages);
          // The folded step logged fewer events: it folded, in checkpointed layers too.
          EXPECT_GT(expect_folded_is_step_by_step(config, o, where), 0) << where;
        }
}

// The allocator sees every iteration's blocks: under it the step does not fold.
TEST(StepFolded, NotUnderTheAllocator) {
  const ModelConfig config = read(testing::step_case("qwen3_next_toy_L4_s128_single_b2").at("config"));
  StepOptions o;
  o.seq_length = 512;
  o.allocator.emplace();
  auto folded = census_step(config, o);
  Result<StepCensus> by_step = [&] {
    const StepByStepGuard every_iteration;
    return census_step(config, o);
  }();
  ASSERT_TRUE(folded && by_step);
  EXPECT_EQ(folded->analysis.events, by_step->analysis.events);
  EXPECT_EQ(folded->allocator->reserved_peak, by_step->allocator->reserved_peak);
}

}  // namespace
}  // namespace census
