// The step-time estimate's parts, derived by hand on the step oracle's Llama toy (hidden 256, 8 heads
// of 32, 2 KV heads, intermediate 512, vocabulary 4096) at 128 tokens, on a device of 10^12 FLOP/s
// and 10^12 B/s; and the device presets' figures.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "plan/plan_cost.h"
#include "plan/plan_device.h"
#include "census/selective_census.h"
#include "models/registry.h"

namespace census {
namespace {

ModelConfig toy() {
  nlohmann::json json = {{"model_type", "llama"}, {"hidden_size", 256}, {"num_attention_heads", 8},
                         {"num_key_value_heads", 2}, {"head_dim", 32},      {"intermediate_size", 512},
                         {"num_hidden_layers", 4},   {"vocab_size", 4096},  {"max_position_embeddings", 8192}};
  auto config = read_config(json);
  if (!config) throw std::runtime_error(config.refusal().message());
  return config.take();
}

const PartTime& part(const ForwardTime& t, const std::string& name) {
  for (const PartTime& p : t.parts)
    if (p.part == name) return p;
  throw std::runtime_error("no part " + name);
}

constexpr Throughput kUnit{1e12, 1e12};

// attention: q and o 2 x 128 x 256 x 256 each, k and v 2 x 128 x 256 x 64 each: 41,943,040 FLOPs;
// ffn: gate, up and down 2 x 128 x 256 x 512 each: 100,663,296; scores: QK and AV 2 x 128 x 128 x 32
// per head, 8 heads: 16,777,216. Each is compute-bound (its bytes take a few microseconds), so its
// time is FLOPs / 10^12.
TEST(PlanCost, LayerPartsAreTheCensussFlopsAtThePeak) {
  const ForwardTime t = layer_forward_time(toy(), 0, 128, kUnit);
  EXPECT_EQ(part(t, "attention").flops, 41'943'040);
  EXPECT_EQ(part(t, "ffn").flops, 100'663'296);
  EXPECT_EQ(part(t, "scores").flops, 16'777'216);
  for (const char* name : {"attention", "ffn", "scores"}) {
    EXPECT_TRUE(part(t, name).compute_bound) << name;
    EXPECT_DOUBLE_EQ(part(t, name).seconds, part(t, name).flops / 1e12) << name;
  }
  // The norms run no matmul: memory-bound, their bytes over 10^12 B/s.
  EXPECT_EQ(part(t, "norm").flops, 0);
  EXPECT_DOUBLE_EQ(part(t, "norm").seconds, part(t, "norm").bytes / 1e12);
  double sum = 0;
  for (const PartTime& p : t.parts) sum += p.seconds;
  EXPECT_DOUBLE_EQ(t.seconds, sum);
}

// The selective backward re-runs the policy's share of the attention projections' and of the rest's
// matmuls, the weightless norms whole, and not the attention kernel (the policy saves its outputs).
TEST(PlanCost, SelectiveRecomputeIsThePolicysShare) {
  const ModelConfig c = toy();
  const ForwardTime t = layer_forward_time(c, 0, 128, kUnit);
  const RecomputeShares shares = census_recomputed(c, 0, 128);
  EXPECT_GT(shares.attention_mm, 0);
  EXPECT_DOUBLE_EQ(t.selective_recompute_seconds, shares.attention_mm * part(t, "attention").seconds +
                                                      shares.ffn_mm * part(t, "ffn").seconds + part(t, "norm").seconds);
}

// The LM head: 2 x 128 x 256 x 4096 = 268,435,456 FLOPs, compute-bound; the final norm and the loss
// (the fp32 logits, log-softmax, the gather) run no matmul.
TEST(PlanCost, OutputLayerHeadAndLoss) {
  const ForwardTime t = output_forward_time(toy(), 128, kUnit);
  EXPECT_EQ(part(t, "lm_head").flops, 268'435'456);
  EXPECT_DOUBLE_EQ(part(t, "lm_head").seconds, 268'435'456 / 1e12);
  EXPECT_EQ(part(t, "loss").flops, 0);
  EXPECT_GE(part(t, "loss").bytes, 128 * 4096 * 4);  // at least the fp32 logits, written once
  EXPECT_EQ(part(t, "final_norm").flops, 0);
}

// Ring collectives: all-reduce 2 (n-1)/n of the bytes, all-gather (n-1)/n; an all-to-all sends
// (n-1)/n of a rank's bytes off it; nothing over one rank.
TEST(PlanCost, RingCollectives) {
  EXPECT_DOUBLE_EQ(all_reduce_seconds(1'000'000, 4, 1e9), 2 * 3.0 / 4 * 1e-3);
  EXPECT_DOUBLE_EQ(all_gather_seconds(1'000'000, 4, 1e9), 3.0 / 4 * 1e-3);
  EXPECT_DOUBLE_EQ(all_to_all_seconds(1'000'000, 8, 1e9), 7.0 / 8 * 1e-3);
  EXPECT_EQ(all_reduce_seconds(1'000'000, 1, 1e9), 0);
  EXPECT_EQ(all_to_all_seconds(1'000'000, 1, 1e9), 0);
}

// Context parallelism 2: the rank's 64 tokens, its projections and MLP the census's at 64 tokens
// (half of 128's: 20,971,520 and 50,331,648 FLOPs), its attention kernel twice the 64-token shard's
// (2 x 2 x 2 x 64 x 64 x 32 x 8 = 8,388,608: a load-balanced ring's 64 queries meet all 128 keys,
// half of the 128-token kernel's 16,777,216).
TEST(PlanCost, ContextParallelRunsTheKernelCTimes) {
  const ForwardTime shard = layer_forward_time(toy(), 0, 64, kUnit);
  const ForwardTime ring = layer_forward_time(toy(), 0, 64, kUnit, 2);
  EXPECT_EQ(part(ring, "attention").flops, 20'971'520);
  EXPECT_EQ(part(ring, "ffn").flops, 50'331'648);
  EXPECT_EQ(part(shard, "scores").flops, 4'194'304);
  EXPECT_EQ(part(ring, "scores").flops, 8'388'608);
  EXPECT_EQ(part(ring, "scores").bytes, 2 * part(shard, "scores").bytes);
  EXPECT_DOUBLE_EQ(ring.seconds - shard.seconds, part(shard, "scores").seconds);
}

TEST(PlanDevice, EveryPresetHasFiguresAndASource) {
  for (const char* name : {"h100", "h200", "a100", "b200", "910b", "910c"}) {
    const Device* d = find_device(name);
    ASSERT_NE(d, nullptr) << name;
    EXPECT_GT(d->peak_tflops, 0);
    EXPECT_GT(d->hbm_gbs, 0);
    EXPECT_GT(d->link_gbs, 0);
    EXPECT_GT(d->nic_gbs, 0);
    EXPECT_GT(d->memory_bytes, 0);
    EXPECT_FALSE(d->source.empty());
  }
  EXPECT_EQ(find_device("tpu"), nullptr);
  // H100 SXM5's datasheet: 989 TFLOPS dense BF16, 3.35 TB/s.
  EXPECT_EQ(find_device("h100")->peak_tflops, 989);
  EXPECT_EQ(find_device("h100")->hbm_gbs, 3350);
}

}  // namespace
}  // namespace census
