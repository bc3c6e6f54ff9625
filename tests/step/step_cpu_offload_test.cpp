// FSDP2's CPUOffloadPolicy in a whole step (census step --fsdp --cpu-offload), derived by hand on the Llama toy
// of the parallel oracle's cases (tests/data/step/parallel/, where every CPU-offloading case is compared whole,
// its host record too, by step_parallel_oracle_test.cpp): hidden 256, 8 heads and 2 KV heads of 32,
// intermediate 512, vocabulary 4,096, 4 layers; 128 tokens; FSDP2 over 4 ranks.
//
// The rank's shards, by unit (a layer's 557,568 parameters: q and o 256 x 256, k and v 64 x 256, gate, up
// and down 512 x 256, two norms of 256; the root's 2,097,408: the embedding and the head 4,096 x 256, the
// final norm 256), a quarter each: 139,392 elements a layer, 524,352 the root, 1,081,920 in all. Under
// MixedPrecisionPolicy(bf16, fp32) they are fp32: 4,327,680 B, a layer's 557,568 B and the root's
// 2,097,408 B.
#include <gtest/gtest.h>

#include "models/registry.h"
#include "step/step_census.h"
#include "step_cases.h"

namespace census {
namespace {

constexpr int64_t kShardBytes = 4'327'680;  // fp32
constexpr int64_t kLayerShardBytes = 557'568;
constexpr int64_t kRootShardBytes = 2'097'408;

nlohmann::json oracle_case(const std::string& name) { return testing::step_case(name, "step/parallel"); }

ModelConfig llama_toy() {
  auto config = read_config(oracle_case("llama_toy_L4_s128_fsdp4_single").at("config"));
  if (!config) throw std::runtime_error(config.refusal().message());
  return config.take();
}

StepOptions sharded(int64_t micro_batches, bool adamw, bool offload, bool mixed_precision = true) {
  StepOptions o;
  o.seq_length = 128;
  o.micro_batches = micro_batches;
  if (adamw) {
    o.optimizer = StepOptimizer::kAdamW;
    o.optimizer_impl = nn::OptimizerImpl::kForLoop;
    o.first_step = true;
  }
  o.fsdp.shards = 4;
  o.fsdp.mixed_precision = mixed_precision;
  o.fsdp.cpu_offload = offload;
  return o;
}

// Four micro-batches, then the for-loop AdamW's first step, on the host:
//   the shards                                                       4,327,680 B  pinned
//   their gradients, the first micro-batch's copies (fp32)           4,327,680 B  pinned
//   exp_avg and exp_avg_sq, and 39 fp32 step counts           8,655,360 + 156 B
//   the step's temporaries at the head, the last parameter: its
//   sqrt and the division (1,024 x 256 fp32 each), and the final
//   norm's denominator still held from the loop's step before   2 x 1,048,576 + 256 B
// 19,408,284 B at the optimizer step's peak; the shards and the states are left, 12,983,196 B. Each
// micro-batch copies its gradients to the host (4,327,680 B; the later three's added into the first's and
// freed) and the shards to the device: in the forward every unit's, in the backward again the units the
// forward resharded, the root and the first three layers (the last layer is not resharded after forward).
TEST(StepCpuOffload, TheHostHoldsTheShardsTheirGradientsAndTheOptimizersStates) {
  const StepCensus s = testing::step_or_throw(llama_toy(), sharded(4, true, true));
  ASSERT_TRUE(s.offloaded_to_host.has_value());
  const StepHostAnalysis& host = *s.offloaded_to_host;
  const int64_t states = 2 * kShardBytes + 39 * 4;
  const int64_t temporaries = 2 * 1'048'576 + 256;
  EXPECT_EQ(host.peak_split.parameters(), kShardBytes);
  EXPECT_EQ(host.peak_split.gradients(), kShardBytes);
  EXPECT_EQ(host.peak_split.optimizer_states(), states);
  EXPECT_EQ(host.peak_split.other(), temporaries);
  EXPECT_EQ(host.peak_bytes, 19'408'284);
  EXPECT_EQ(host.peak_phase, "optimizer_step");
  EXPECT_EQ(host.live_at_end, kShardBytes + states);
  EXPECT_EQ(host.pinned_peak_bytes, 2 * kShardBytes);
  EXPECT_EQ(host.copied_to_host_bytes, 4 * kShardBytes);
  EXPECT_EQ(host.copied_to_device_bytes, 4 * (kShardBytes + kRootShardBytes + 3 * kLayerShardBytes));
  // The device holds none of them: its optimizer step allocates nothing, its end only the buffers.
  EXPECT_EQ(s.optimizer_step_peak.bytes, 128);
  EXPECT_EQ(s.analysis.phases.back().live_at_end, 128);
  const nlohmann::json oracle = oracle_case("llama_toy_L4_s128_fsdp4_cpu_offload_accum_m4_adamw");
  EXPECT_EQ(host.peak_bytes, oracle.at("host").at("peak_bytes").get<int64_t>());
  EXPECT_EQ(host.copied_to_device_bytes, oracle.at("host").at("brought_back_bytes").get<int64_t>());
}

// One micro-batch, no optimizer: the forward's peak at the loss holds what it held without the policy, but
// for the shards, which are on the host. The all-gathers' device copies of the shards (fp32, and their bf16
// casts) are freed before the collective runs; none is held at the loss.
TEST(StepCpuOffload, TheDevicesPeakIsTheShardsLess) {
  for (const bool mixed_precision : {true, false}) {
    const StepCensus plain = testing::step_or_throw(llama_toy(), sharded(1, false, false, mixed_precision));
    const StepCensus offloaded = testing::step_or_throw(llama_toy(), sharded(1, false, true, mixed_precision));
    const int64_t shards = mixed_precision ? kShardBytes : kShardBytes / 2;
    EXPECT_EQ(plain.analysis.peak.phase, "F0");
    EXPECT_EQ(offloaded.analysis.peak.phase, "F0");
    EXPECT_EQ(offloaded.analysis.peak.bytes, plain.analysis.peak.bytes - shards) << mixed_precision;
    EXPECT_EQ(offloaded.analysis.peak.split.parameters(), 0);
    // The host: the shards and one micro-batch's gradients, all pinned; their blocks, a power of two
    // each, are the tensors' bytes here (every shard's bytes are one).
    const StepHostAnalysis& host = *offloaded.offloaded_to_host;
    EXPECT_EQ(host.peak_bytes, 2 * shards);
    EXPECT_EQ(host.pinned_peak_bytes, 2 * shards);
    EXPECT_EQ(host.pinned_reserved_bytes, 2 * shards);
    EXPECT_EQ(offloaded.gradient_bytes_at_end, shards);  // the gradients, wherever they are
  }
}

// The caching host allocator rounds each pinned block up to a power of two. Over 3 ranks the bf16 shards
// are a third of each parameter's rows, dim 0 padded: a layer's q and o 86 x 256 (44,032 B, a 65,536 B
// block), k and v 22 x 256 (11,264 B; 16,384), gate and up 171 x 256 (87,552 B; 131,072), down 86 x 512
// (88,064 B; 131,072), its norms 86 (172 B; 256); the embedding and the head 1,366 x 256 (699,392 B;
// 1,048,576), the final norm 86 (172 B; 256). The blocks: 557,568 B a layer and 2,097,408 B the root,
// 4,327,680 B for the shards and as much for the gradients' copies.
TEST(StepCpuOffload, PinnedBlocksArePowersOfTwo) {
  StepOptions o = sharded(1, false, true, /*mixed_precision=*/false);
  o.fsdp.shards = 3;
  const StepCensus s = testing::step_or_throw(llama_toy(), o);
  const StepHostAnalysis& host = *s.offloaded_to_host;
  const int64_t layer = 2 * 44'032 + 2 * 11'264 + 2 * 87'552 + 88'064 + 2 * 172;
  const int64_t shards = 4 * layer + 2 * 699'392 + 172;
  EXPECT_EQ(s.parameter_bytes, shards);
  EXPECT_EQ(host.pinned_peak_bytes, 2 * shards);
  EXPECT_EQ(host.pinned_reserved_bytes, 2 * (4 * 557'568 + 2'097'408));
}

// The steady state (step 2 on): the states are on the host from the start, the device's step is the first
// step's, and the optimizer steps as torch.optim does on host tensors, in its for-loop form.
TEST(StepCpuOffload, TheSteadyStatesStatesAreOnTheHostFromTheStart) {
  StepOptions first = sharded(1, true, true);
  first.optimizer_impl.reset();
  StepOptions steady = first;
  steady.first_step = false;
  const StepCensus one = testing::step_or_throw(llama_toy(), first);
  const StepCensus two = testing::step_or_throw(llama_toy(), steady);
  EXPECT_EQ(two.analysis.peak.bytes, one.analysis.peak.bytes);
  EXPECT_EQ(two.analysis.peak.split.optimizer_states(), 0);
  EXPECT_EQ(two.offloaded_to_host->peak_bytes, one.offloaded_to_host->peak_bytes);
  EXPECT_EQ(two.offloaded_to_host->live_at_end, one.offloaded_to_host->live_at_end);
  // The for-loop: the foreach form would hold every parameter's temporaries at once.
  StepOptions foreach = steady;
  foreach.optimizer_impl = nn::OptimizerImpl::kForEach;
  const StepCensus listed = testing::step_or_throw(llama_toy(), foreach);
  EXPECT_GT(listed.offloaded_to_host->peak_split.other(), two.offloaded_to_host->peak_split.other());
}

// Later micro-batches' passes are replayed, not run: their copies are counted as the recorded pass's.
TEST(StepCpuOffload, ReplayedPassesCopyAsTheRunOnes) {
  const StepOptions o = sharded(6, true, true);
  auto replayed = census_step(llama_toy(), o);
  auto run = census_step_op_by_op(llama_toy(), o);
  ASSERT_TRUE(replayed && run);
  EXPECT_GT(replayed->passes_replayed, 0);
  const StepHostAnalysis& a = *replayed->offloaded_to_host;
  const StepHostAnalysis& b = *run->offloaded_to_host;
  EXPECT_EQ(a.copied_to_host_bytes, b.copied_to_host_bytes);
  EXPECT_EQ(a.copied_to_device_bytes, b.copied_to_device_bytes);
  EXPECT_EQ(a.peak_bytes, b.peak_bytes);
  EXPECT_EQ(a.peak_phase, b.peak_phase);
  EXPECT_EQ(replayed->analysis.peak.bytes, run->analysis.peak.bytes);
}

TEST(StepCpuOffload, RefusedWhereItIsNotPricedYet) {
  StepOptions o = sharded(1, false, true);
  o.tensor_parallel = 2;
  o.sequence_parallel = true;
  auto refused = census_step(llama_toy(), o);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.refusal().message().find("--cpu-offload with --tp"), std::string::npos) << refused.refusal().message();
}

}  // namespace
}  // namespace census
