// The replayed step against the step run op by op: census_step runs each chunk's first two
// micro-batches through the engine and replays the later ones' passes from the second's events;
// census_step_op_by_op runs every pass. Over schedules, stages, recompute modes, tensor, context and
// expert parallelism, a tied head and a composition, on the Llama and Qwen3-MoE toys, every number both report is the same.
#include <gtest/gtest.h>

#include "models/registry.h"
#include "step/step_census.h"
#include "step_expect_same.h"

namespace census {
namespace {

ModelConfig toy(const std::string& model_type, bool moe = false, bool tied = false) {
  nlohmann::json json = {{"model_type", model_type}, {"hidden_size", 256}, {"num_attention_heads", 8},
                         {"num_key_value_heads", 2}, {"head_dim", 32},      {"intermediate_size", 512},
                         {"num_hidden_layers", 4},   {"vocab_size", 4096},  {"max_position_embeddings", 8192},
                         {"tie_word_embeddings", tied}};
  if (moe) {
    json["num_experts"] = 8;
    json["num_experts_per_tok"] = 2;
    json["moe_intermediate_size"] = 256;
  }
  auto config = read_config(json);
  if (!config) throw std::runtime_error(config.refusal().message());
  return config.take();
}

// Runs both and compares; returns how many passes the replayed step replayed.
int64_t expect_same_step(const ModelConfig& config, const StepOptions& o, const std::string& where) {
  auto replayed = census_step(config, o);
  auto op_by_op = census_step_op_by_op(config, o);
  if (!replayed || !op_by_op) {
    ADD_FAILURE() << where << ": refused";
    return 0;
  }
  const StepCensus& a = *replayed;
  const StepCensus& b = *op_by_op;
  EXPECT_EQ(b.passes_replayed, 0) << where;
  testing::expect_same_step_census(a, b, where, /*same_events=*/true);
  return a.passes_replayed;
}

struct Layout {
  const char* name;
  PipelineSchedule schedule;
  int64_t stages, virtual_stages, micro_batches;
};

constexpr Layout kLayouts[] = {
    {"plain", PipelineSchedule::k1F1B, 1, 1, 5},
    {"1f1b", PipelineSchedule::k1F1B, 4, 1, 8},
    {"gpipe", PipelineSchedule::kGPipe, 2, 1, 6},
    {"interleaved", PipelineSchedule::kInterleaved, 2, 2, 6},
};

TEST(StepReplay, EqualsTheStepRunOpByOp) {
  for (const bool moe : {false, true}) {
    const ModelConfig config = moe ? toy("qwen3_moe", true) : toy("llama");
    for (const Layout& layout : kLayouts)
      for (const Recompute recompute : {Recompute::kNone, Recompute::kSelective, Recompute::kFull})
        for (int64_t stage = 0; stage < layout.stages; ++stage) {
          StepOptions o;
          o.seq_length = 64;
          o.micro_batches = layout.micro_batches;
          o.pipeline_stages = layout.stages;
          o.virtual_stages = layout.virtual_stages;
          o.schedule = layout.schedule;
          o.stage = stage;
          o.recompute = recompute;
          o.optimizer = StepOptimizer::kAdamW;
          const std::string where = std::string(moe ? "qwen3_moe " : "llama ") + layout.name + " stage " +
                                    std::to_string(stage) + " recompute " +
                                    std::to_string(static_cast<int>(recompute));
          // Every chunk runs its first two micro-batches through the engine, the rest replayed.
          const int64_t replayed = expect_same_step(config, o, where);
          EXPECT_EQ(replayed, 2 * layout.virtual_stages * (layout.micro_batches - 2)) << where;
        }
  }
}

// A composition reweighs the replayed storages by their categories as it does the engine's; tensor
// parallelism and no optimizer change what runs, not the replay.
TEST(StepReplay, EqualsTheStepRunOpByOpComposedAndSharded) {
  StepOptions o;
  o.seq_length = 96;
  o.micro_batches = 4;
  o.pipeline_stages = 2;
  o.stage = 1;
  o.tensor_parallel = 2;
  o.optimizer = StepOptimizer::kAdamW;
  o.composition.data_parallel = 4;
  o.composition.zero = 3;
  o.composition.fp32_master_weights = true;
  o.composition.fp32_gradients = true;
  EXPECT_GT(expect_same_step(toy("qwen3_moe", true), o, "qwen3_moe composed tp 2"), 0);
  o.optimizer = StepOptimizer::kNone;
  o.composition.zero = 2;
  o.stage = 0;
  EXPECT_GT(expect_same_step(toy("llama"), o, "llama composed tp 2 no optimizer"), 0);
  StepOptions tied;
  tied.seq_length = 64;
  tied.micro_batches = 4;
  tied.optimizer = StepOptimizer::kAdamW;
  tied.context_parallel = 2;
  EXPECT_GT(expect_same_step(toy("llama", false, true), tied, "llama tied, cp 2"), 0);
  tied.expert_parallel = 2;
  EXPECT_GT(expect_same_step(toy("qwen3_moe", true, true), tied, "qwen3_moe tied, cp 2, ep 2"), 0);
}

// FSDP2 and DTensor's plan on the rank: a later micro-batch's all-gathers, copy-outs (the unsharded
// parameters grown back by resize_, storages made before the pass), reshards and reduce-scatters repeat,
// and are replayed; every number equals the step run op by op, plain and checkpointed. In a pipeline
// FSDP2's passes find its units as other micro-batches left them, and none is replayed.
TEST(StepReplay, EqualsTheStepRunOpByOpUnderFsdp2AndDTensor) {
  for (const bool moe : {false, true}) {
    const ModelConfig config = moe ? toy("qwen3_moe", true) : toy("llama");
    for (const bool dtensor : {false, true})
      for (const Recompute recompute : {Recompute::kNone, Recompute::kSelective})
        for (const int64_t stages : {1, 2})
          for (int64_t stage = 0; stage < stages; ++stage) {
            const int64_t micro_batches = 5;
            StepOptions o;
            o.seq_length = 64;
            o.micro_batches = micro_batches;
            o.pipeline_stages = stages;
            o.stage = stage;
            o.recompute = recompute;
            o.optimizer = StepOptimizer::kAdamW;
            o.fsdp.shards = 4;
            o.fsdp.mixed_precision = true;
            if (dtensor) {
              o.fsdp.shards = 2;
              o.tensor_parallel = 2;
              o.sequence_parallel = true;
              o.loss_parallel = true;
            }
            const std::string where = std::string(moe ? "qwen3_moe" : "llama") + (dtensor ? " fsdp 2 x tp 2 sp" : " fsdp 4") +
                                      " pp " + std::to_string(stages) + " stage " + std::to_string(stage) +
                                      " recompute " + std::to_string(static_cast<int>(recompute));
            EXPECT_EQ(expect_same_step(config, o, where), stages == 1 ? 2 * (micro_batches - 2) : 0) << where;
          }
  }
}

}  // namespace
}  // namespace census
