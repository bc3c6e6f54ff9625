// The checkpointing policies real runs use (autograd/checkpoint.h, step/recompute_choice.h), each checked
// against the step oracle's cases of it in tests/data/step/ (StepOracleCase: ac_full_reentrant,
// sac_torchtitan_op, ac_torchtitan_layer2 on eight families), and here by hand on the Llama and GPT-OSS
// toys (hidden 256, 8 heads of 32, 2 KV heads, 128 tokens, 4 layers): what each keeps from the forward
// beside full checkpointing, which keeps each layer's input alone.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "models/registry.h"
#include "step/step_census.h"
#include "step_cases.h"

namespace census {
namespace {

ModelConfig toy(const std::string& family) {
  auto config = read_config(testing::step_case(family + "_toy_L4_s128_single").at("config"));
  if (!config) throw std::runtime_error(config.refusal().message());
  return config.take();
}

StepCensus run(const ModelConfig& config, Recompute mode, int64_t every_nth_layer = 0) {
  StepOptions o;
  o.seq_length = 128;
  o.recompute = mode;
  o.recompute_every_nth_layer = every_nth_layer;
  return testing::step_or_throw(config, o);
}

// What F0 leaves live beyond what it started with: the graph's saves, the loss, the inputs.
int64_t kept(const StepCensus& s) { return s.analysis.phases[1].live_at_end - s.analysis.phases[1].live_at_start; }

// torchtitan's per-op policy saves the 1st, 3rd, ... aten.mm of a layer and the attention kernel's
// outputs. Llama's layer runs seven mm: q (1, saved: [128, 256] bf16, 65,536 B), k (2), v (3, saved:
// [128, 64], 16,384 B), o (4), gate (5, saved: [128, 512], 131,072 B), up (6), down (7, saved: [128, 256],
// 65,536 B); and the flash contract's output [1, 128, 8, 32] bf16 (65,536 B) and two fp32 [1, 8, 128, 8]
// statistics (32,768 B each): 409,600 B a layer beyond full checkpointing's, 1,638,400 B for four.
// HyperParallel's policy saves the same on these layers (mm alternating, the kernel always).
TEST(StepRecomputePolicies, TorchtitansPolicySavesEveryOtherMmAndTheAttention) {
  const ModelConfig llama = toy("llama");
  const int64_t full = kept(run(llama, Recompute::kFull));
  EXPECT_EQ(kept(run(llama, Recompute::kTorchtitanOp)) - full, 4 * 409'600);
  EXPECT_EQ(kept(run(llama, Recompute::kSelective)), kept(run(llama, Recompute::kTorchtitanOp)));
}

// GPT-OSS's projections have biases (addmm, which torchtitan's list does not name) and its experts run
// _grouped_mm (nor that): under torchtitan's policy a layer keeps the attention kernel's outputs alone,
// 65,536 + 2 x 32,768 = 131,072 B. HyperParallel's keeps every addmm (q [128, 256] 65,536, k and v
// [128, 64] 16,384 each, o [128, 256] 65,536, the router [128, 8] 2,048) and the first grouped_mm (the
// experts' gate_up, 256 routed rows x 512, 262,144 B) besides: 428,032 B a layer more.
TEST(StepRecomputePolicies, TorchtitansPolicyRecomputesAddmmAndGroupedMm) {
  const ModelConfig gpt_oss = toy("gpt_oss");
  const int64_t full = kept(run(gpt_oss, Recompute::kFull));
  const int64_t torchtitan = kept(run(gpt_oss, Recompute::kTorchtitanOp));
  EXPECT_EQ(torchtitan - full, 4 * 131'072);
  EXPECT_EQ(kept(run(gpt_oss, Recompute::kSelective)) - torchtitan, 4 * 428'032);
}

// Reentrant checkpointing keeps the same from the forward (each layer's input), but its Function's node
// holds the layer's call until the graph is gone: the rotary cos and sin (1, 128, 32) bf16, 8,192 B each,
// and the position ids (1, 128) int64, 1,024 B, outlive the last layer's backward. At the step's peak, the
// embedding's backward, they are 17,408 B above non-reentrant checkpointing's.
TEST(StepRecomputePolicies, ReentrantCheckpointingHoldsTheLayersCallToTheEnd) {
  const ModelConfig llama = toy("llama");
  const StepCensus full = run(llama, Recompute::kFull), reentrant = run(llama, Recompute::kFullReentrant);
  EXPECT_EQ(kept(reentrant), kept(full));
  EXPECT_EQ(reentrant.analysis.peak.bytes - full.analysis.peak.bytes, 2 * 8'192 + 1'024);
  EXPECT_EQ(reentrant.analysis.peak.op, "aten.embedding_dense_backward.default");
}

// torchtitan-layer:N checkpoints every N-th layer, counting from 1: N = 1 is full checkpointing; N = 2
// keeps layers 0 and 2 plain and layers 1 and 3 checkpointed, between none and full; N past the layers,
// none.
TEST(StepRecomputePolicies, EveryNthLayer) {
  const ModelConfig llama = toy("llama");
  EXPECT_EQ(kept(run(llama, Recompute::kNone, 1)), kept(run(llama, Recompute::kFull)));
  EXPECT_EQ(kept(run(llama, Recompute::kNone, 5)), kept(run(llama, Recompute::kNone)));
  const int64_t every_second = kept(run(llama, Recompute::kNone, 2));
  EXPECT_LT(every_second, kept(run(llama, Recompute::kNone)));
  EXPECT_GT(every_second, kept(run(llama, Recompute::kFull)));
}

TEST(StepRecomputePolicies, NamesReadAndWritten) {
  const ModelConfig llama = toy("llama");
  for (const char* text : {"full-reentrant", "torchtitan-op", "torchtitan-layer:2", "torchtitan-layer:1"}) {
    auto parsed = parse_recompute(llama, text, "--recompute");
    ASSERT_TRUE(parsed.ok()) << text;
    EXPECT_EQ(recompute_text(*parsed), text);
  }
  EXPECT_EQ(parse_recompute(llama, "torchtitan-layer:3", "--recompute")->every_nth_layer, 3);
  for (const char* bad : {"torchtitan-layer:0", "torchtitan-layer:", "torchtitan-layer:x", "torchtitan-layer:-1",
                          "torchtitan-layer:2,decoder=full", "torchtitan-op,torchtitan-layer:2", "torchtitan",
                          "torchtitan-layer:99999999"})
    EXPECT_FALSE(parse_recompute(llama, bad, "--recompute").ok()) << bad;
}

// Reentrant checkpointing is not simulated beside FSDP2's or DTensor's hooks: refused by name.
TEST(StepRecomputePolicies, ReentrantBesideFsdpOrDTensorIsRefused) {
  const ModelConfig llama = toy("llama");
  StepOptions o;
  o.seq_length = 128;
  o.recompute = Recompute::kFullReentrant;
  o.fsdp.shards = 2;
  o.composition.data_parallel = 2;
  auto fsdp = census_step(llama, o);
  ASSERT_FALSE(fsdp);
  EXPECT_NE(fsdp.refusal().message().find("--recompute full-reentrant with --fsdp"), std::string::npos);
  o.fsdp.shards = 1;
  o.tensor_parallel = 2;
  o.sequence_parallel = o.loss_parallel = true;
  auto dtensor = census_step(llama, o);
  ASSERT_FALSE(dtensor);
  EXPECT_NE(dtensor.refusal().message().find("with --sequence-parallel"), std::string::npos);
}

}  // namespace
}  // namespace census
