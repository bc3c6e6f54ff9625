// Uneven pipeline stages (step/pipeline_split.h) and recompute by layer kind (step/recompute_choice.h) in
// census step. Each uneven stage is derived from an even split of another toy that gives the stage the
// same layers, the same neighbours and the same schedule, so its step is that one's, to the byte: the
// step oracle's Llama toy (hidden 256, 8 heads, 2 KV heads, head_dim 32, intermediate 512, vocabulary
// 4096) at 4, 2, 3 and 6 layers.
#include <gtest/gtest.h>

#include "models/registry.h"
#include "step/step_census.h"
#include "step_cases.h"

namespace census {
namespace {

ModelConfig toy(int64_t layers, nlohmann::json extra = nlohmann::json::object()) {
  nlohmann::json json = {{"model_type", "llama"}, {"hidden_size", 256}, {"num_attention_heads", 8},
                         {"num_key_value_heads", 2}, {"head_dim", 32},      {"intermediate_size", 512},
                         {"num_hidden_layers", layers}, {"vocab_size", 4096}, {"max_position_embeddings", 8192}};
  json.update(extra);
  auto config = read_config(json);
  if (!config) throw std::runtime_error(config.refusal().message());
  return config.take();
}

// A Qwen3-MoE toy whose layer 0 is dense (mlp_only_layers): kinds "dense" and "moe".
ModelConfig two_kinds() {
  return toy(4, {{"model_type", "qwen3_moe"}, {"num_experts", 8}, {"num_experts_per_tok", 2},
                 {"moe_intermediate_size", 256}, {"mlp_only_layers", {0}}});
}

StepCensus run(const ModelConfig& config, const StepOptions& o) { return testing::step_or_throw(config, o); }

StepOptions pipeline(int64_t stages, int64_t stage, int64_t micro_batches = 4) {
  StepOptions o;
  o.seq_length = 128;
  o.micro_batches = micro_batches;
  o.pipeline_stages = stages;
  o.stage = stage;
  o.optimizer = StepOptimizer::kAdamW;
  o.first_step = true;  // the first step, its for-loop AdamW, as the step oracle ran it
  o.optimizer_impl = nn::OptimizerImpl::kForLoop;
  return o;
}

void expect_same_step(const StepCensus& a, const StepCensus& b) {
  EXPECT_EQ(a.analysis.peak.bytes, b.analysis.peak.bytes);
  EXPECT_EQ(a.analysis.peak.phase, b.analysis.peak.phase);
  EXPECT_EQ(a.analysis.other_peak.bytes, b.analysis.other_peak.bytes);
  ASSERT_EQ(a.analysis.phases.size(), b.analysis.phases.size());
  for (size_t i = 0; i < a.analysis.phases.size(); ++i) EXPECT_EQ(a.analysis.phases[i].peak.bytes, b.analysis.phases[i].peak.bytes);
  EXPECT_EQ(a.parameter_bytes, b.parameter_bytes);
  EXPECT_EQ(a.optimizer_state_bytes, b.optimizer_state_bytes);
  EXPECT_EQ(a.chunks.front().size(), b.chunks.front().size());
}

TEST(PipelineSplit, ChunksAsMegatronSplitsThem) {
  // DeepSeek-V3's 61 layers over 16 stages, 3 on the first and 2 on the last: 56 left, 4 each.
  auto chunks = pipeline_chunks(61, 16, 1, {3, 2, false, false});
  ASSERT_TRUE(chunks.ok());
  EXPECT_EQ((*chunks)[0].size(), 3);
  EXPECT_EQ((*chunks)[1].begin, 3);
  EXPECT_EQ((*chunks)[14].size(), 4);
  EXPECT_EQ((*chunks)[15].begin, 59);
  EXPECT_EQ((*chunks)[15].end, 61);
  // Qwen3-235B-A22B's 94 over 8 stages of 4 chunks, the embedding and the loss each a layer: 96 units, 3
  // a chunk; the model's first chunk (stage 0's chunk 0) and last (stage 7's chunk 3) hold 2.
  auto interleaved = pipeline_chunks(94, 8, 4, {0, 0, true, true});
  ASSERT_TRUE(interleaved.ok());
  EXPECT_EQ((*interleaved)[0].size(), 2);
  EXPECT_EQ((*interleaved)[1].size(), 3);
  EXPECT_EQ((*interleaved)[31].size(), 2);
  EXPECT_EQ((*interleaved)[31].end, 94);
  // 14 layers over 3 stages of 2 chunks, 6 on the first: 3 in each of its chunks (model chunks 0 and 3);
  // the other two stages share 8, 4 each, 2 a chunk.
  auto by_stage = pipeline_chunks(14, 3, 2, {6, 0, false, false});
  ASSERT_TRUE(by_stage.ok());
  const std::vector<int64_t> sizes = {3, 2, 2, 3, 2, 2};
  for (size_t g = 0; g < sizes.size(); ++g) EXPECT_EQ((*by_stage)[g].size(), sizes[g]) << g;
  EXPECT_EQ((*by_stage)[3].begin, 7);
}

TEST(PipelineSplit, RefusesWhatCannotBeSplit) {
  EXPECT_FALSE(pipeline_chunks(61, 16, 1, {}).ok());                     // 61 over 16
  EXPECT_FALSE(pipeline_chunks(61, 16, 1, {3, 3, false, false}).ok());   // 55 over 14
  EXPECT_FALSE(pipeline_chunks(8, 2, 2, {3, 5, false, false}).ok());     // 3 over 2 chunks
  EXPECT_FALSE(pipeline_chunks(8, 2, 1, {3, 0, true, false}).ok());      // both ways at once
  EXPECT_FALSE(pipeline_chunks(8, 1, 1, {3, 0, false, false}).ok());     // no pipeline
  EXPECT_FALSE(pipeline_chunks(8, 4, 1, {8, 0, false, false}).ok());     // nothing left
  EXPECT_FALSE(pipeline_chunks(2, 4, 1, {0, 0, true, true}).ok());       // a chunk with no layer
}

// The first stage of 1 layer of 4 over 2 stages is the first of a 2-layer toy's even 2 stages (the
// embedding and layer 0, one warm-up forward); the last stage's 3 layers are the last of a 6-layer toy's
// even 2 (3 layers, the final norm, head and loss).
TEST(StepStages, FirstAndLastStageLayers) {
  StepOptions uneven = pipeline(2, 0);
  uneven.split = {1, 0, false, false};
  expect_same_step(run(toy(4), uneven), run(toy(2), pipeline(2, 0)));
  uneven.stage = 1;
  expect_same_step(run(toy(4), uneven), run(toy(6), pipeline(2, 1)));
  StepOptions last_set = pipeline(2, 1);
  last_set.split = {0, 3, false, false};
  expect_same_step(run(toy(4), last_set), run(toy(6), pipeline(2, 1)));
}

// The embedding and the loss each a layer: 4 layers and 2 units over 3 stages, 2 units each: stage 0 the
// embedding and layer 0, stage 1 layers 1-2, stage 2 layer 3 and the loss; stages 0 and 2 are the 3-layer
// toy's even 3 stages' (a layer each), under the same 3-stage schedule.
TEST(StepStages, EmbeddingAndLossAsLayers) {
  for (int64_t stage : {0, 2}) {
    StepOptions o = pipeline(3, stage);
    o.split = {0, 0, true, true};
    const StepCensus s = run(toy(4), o);
    EXPECT_EQ(s.chunks.front().size(), 1);
    expect_same_step(s, run(toy(3), pipeline(3, stage)));
  }
  StepOptions middle = pipeline(3, 1);
  middle.split = {0, 0, true, true};
  EXPECT_EQ(run(toy(4), middle).chunks.front().begin, 1);
  EXPECT_EQ(run(toy(4), middle).chunks.front().end, 3);
}

// A mode named for every kind is that mode for every layer; a mode for one kind keeps the rest's.
TEST(StepStages, RecomputeByKind) {
  const ModelConfig c = two_kinds();
  StepOptions o = pipeline(1, 0, 1);
  o.optimizer = StepOptimizer::kNone;
  auto step = [&](Recompute all, std::vector<std::pair<std::string, Recompute>> by_kind) {
    StepOptions mine = o;
    mine.recompute = all;
    mine.recompute_by_kind = std::move(by_kind);
    return run(c, mine);
  };
  expect_same_step(step(Recompute::kNone, {{"dense", Recompute::kFull}, {"moe", Recompute::kFull}}), step(Recompute::kFull, {}));
  expect_same_step(step(Recompute::kFull, {{"dense", Recompute::kSelective}, {"moe", Recompute::kSelective}}),
                   step(Recompute::kSelective, {}));
  // The MoE layers fully recomputed, the dense one not: F0 keeps more than under full recompute
  // everywhere, less than under none.
  auto kept = [](const StepCensus& s) { return s.analysis.phases[1].live_at_end - s.analysis.phases[1].live_at_start; };
  const int64_t mixed = kept(step(Recompute::kNone, {{"moe", Recompute::kFull}}));
  EXPECT_LT(mixed, kept(step(Recompute::kNone, {})));
  EXPECT_GT(mixed, kept(step(Recompute::kFull, {})));
  StepOptions unknown = o;
  unknown.recompute_by_kind = {{"mamba", Recompute::kFull}};
  EXPECT_FALSE(census_step(c, unknown).ok());
}

TEST(StepStages, RecomputeText) {
  const ModelConfig c = two_kinds();
  auto parsed = parse_recompute(c, "none,moe=full", "--recompute");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->all, Recompute::kNone);
  EXPECT_EQ(parsed->of_kind("moe"), Recompute::kFull);
  EXPECT_EQ(parsed->of_kind("dense"), Recompute::kNone);
  EXPECT_EQ(recompute_text(*parsed), "none,moe=full");
  // A kind given its default's mode is dropped; a kind first keeps none for the rest.
  EXPECT_EQ(recompute_text(*parse_recompute(c, "full,dense=full,moe=selective", "--recompute")), "full,moe=selective");
  EXPECT_EQ(recompute_text(*parse_recompute(c, "moe=full", "--recompute")), "none,moe=full");
  for (const char* bad : {"sometimes", "none,mamba=full", "none,moe=full,moe=none", "none,full", ""})
    EXPECT_FALSE(parse_recompute(c, bad, "--recompute").ok()) << bad;
}

}  // namespace
}  // namespace census
