// The caching allocator fed by the step (step/step_alloc.h), on every case of the step oracle
// (tests/data/step/): the bytes the step asks for peak where the step's own peak is, the allocator's
// figures are the same whether later micro-batches are replayed or run through the engine, and
// AdamW's host step counts are left off the device.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "step/step_census.h"
#include "models/registry.h"
#include "step_cases.h"
#include "step_expect_same.h"

namespace census {
namespace {

using testing::step_case;
using testing::step_case_names;

// The step the oracle ran (its kind, micro-batches, pipeline and stage), with the allocator.
StepOptions allocator_step(const nlohmann::json& oracle, bool every_storage_on_device) {
  StepOptions o = testing::options_of(oracle);
  StepAllocatorOptions a;
  a.every_storage_on_device = every_storage_on_device;
  o.allocator = a;
  return o;
}

class StepAllocatorOracleCase : public ::testing::TestWithParam<std::string> {};

// Every storage on the device (as the oracle's fake tensors count them): the bytes the allocator is
// asked for peak at the step's peak, which is the oracle's. Then with AdamW's step counts on the host,
// as a CUDA run keeps them: one count of 4 B for each parameter with a gradient (Adam's _init_group
// skips a parameter whose .grad is None, as some families leave one), all made in optimizer_step before
// the first update, alive to the end. Each such parameter's state is its exp_avg and exp_avg_sq, a
// gradient's bytes each, and its count, so the counts number (optimizer state bytes - 2 x gradient
// bytes) / 4 (Llama's toy: (17,310,876 - 2 x 8,655,360) / 4 = 39, its 39 parameter tensors). The
// device's requested peak is the highest of the phase peaks before optimizer_step, optimizer_step's
// start level, optimizer_step's peak less 4 x counts where that peak falls in an update (its op the
// update's aten.div.Tensor, after every count is made), and zero_grad's and end's peaks less 4 x counts.
TEST_P(StepAllocatorOracleCase, RequestedPeakIsTheStepPeak) {
  const nlohmann::json oracle = step_case(GetParam());
  if (oracle.contains("error")) GTEST_SKIP() << "the oracle could not run this case: " << oracle.at("error");
  auto config = read_config(oracle.at("config"));
  ASSERT_TRUE(config) << config.refusal().message();
  auto every = census_step(*config, allocator_step(oracle, true));
  ASSERT_TRUE(every) << every.refusal().message();
  ASSERT_TRUE(every->allocator);
  const StepAllocatorCensus& all = *every->allocator;
  EXPECT_EQ(all.requested_peak, every->analysis.peak.bytes);
  EXPECT_EQ(all.requested_peak, oracle.at("peak").at("bytes").get<int64_t>());
  EXPECT_EQ(all.off_device_storages, 0);
  EXPECT_FALSE(all.out_of_memory);

  auto device = census_step(*config, allocator_step(oracle, false));
  ASSERT_TRUE(device);
  const StepAllocatorCensus& on_device = *device->allocator;
  const bool adamw = !oracle.at("optimizer").is_null();
  const int64_t stepped = adamw ? (oracle.at("optimizer").at("state_bytes").get<int64_t>() -
                                   2 * oracle.at("gradients").at("bytes_after_last_backward").get<int64_t>()) / 4
                                : 0;
  const int64_t counts = 4 * stepped;
  EXPECT_EQ(on_device.off_device_storages, stepped);
  EXPECT_EQ(on_device.off_device_bytes, counts);
  int64_t expected = 0;
  bool after_counts = false;
  for (const auto& phase : oracle.at("phases")) {
    const std::string name = phase.at("name");
    const int64_t peak = phase.at("peak_bytes").get<int64_t>();
    if (name == "optimizer_step") {
      ASSERT_EQ(phase.at("peak_op").get<std::string>(), "aten.div.Tensor");
      expected = std::max({expected, phase.at("live_at_start").get<int64_t>(), peak - counts});
      after_counts = true;
    } else {
      expected = std::max(expected, after_counts ? peak - counts : peak);
    }
  }
  EXPECT_EQ(on_device.requested_peak, expected);

  // The allocator's own rules: blocks round requests up, segments hold blocks.
  for (const StepAllocatorCensus* a : {&all, &on_device}) {
    EXPECT_GE(a->allocated_peak, a->requested_peak);
    EXPECT_GE(a->reserved_peak, a->allocated_peak);
    for (const StepAllocatorPhase& phase : a->phases) EXPECT_GE(phase.reserved_peak, phase.allocated_peak) << phase.name;
  }
}

// A later micro-batch's replayed passes are new storages of their own, made and freed where the engine
// would: the allocator sees the same trace, so every figure is the same as with every pass run.
TEST_P(StepAllocatorOracleCase, ReplayedPassesGiveTheSameAllocator) {
  const nlohmann::json oracle = step_case(GetParam());
  if (oracle.contains("error")) GTEST_SKIP() << "the oracle could not run this case: " << oracle.at("error");
  auto config = read_config(oracle.at("config"));
  ASSERT_TRUE(config);
  const StepOptions options = allocator_step(oracle, false);
  auto replayed = census_step(*config, options);
  auto op_by_op = census_step_op_by_op(*config, options);
  ASSERT_TRUE(replayed && op_by_op);
  testing::expect_same_allocator(*replayed->allocator, *op_by_op->allocator, "replayed against op by op");
}

INSTANTIATE_TEST_SUITE_P(Oracle, StepAllocatorOracleCase, ::testing::ValuesIn(step_case_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// The Llama toy of the oracle (hidden 256, 4 layers, vocab 4096) at 128 tokens, 4 micro-batches, AdamW.
Result<ModelConfig> llama_toy() { return read_config(step_case("llama_toy_L4_s128_accum_m4_adamw").at("config")); }

StepOptions accumulated_adamw() {
  StepOptions o;
  o.seq_length = 128;
  o.micro_batches = 4;
  o.optimizer = StepOptimizer::kAdamW;
  o.first_step = true;  // the first step, its for-loop AdamW, as the step oracle ran it
  o.optimizer_impl = nn::OptimizerImpl::kForLoop;
  StepAllocatorOptions a;
  a.every_storage_on_device = true;
  o.allocator = a;
  return o;
}

// Composed: the allocator sees each storage at its category's share and the during-pass bytes as one
// block a pass, so the bytes it is asked for peak at the composed peak; also_composed gives each
// composition its own allocator, equal to the step composed that way.
TEST(StepAllocator, RequestedPeakIsTheComposedPeak) {
  auto config = llama_toy();
  ASSERT_TRUE(config);
  std::vector<StepComposition> compositions;
  for (int zero : {1, 2, 3}) {
    StepComposition c;
    c.data_parallel = 4;
    c.zero = zero;
    c.fp32_master_weights = true;
    c.fp32_gradients = zero == 3;
    compositions.push_back(c);
  }
  StepOptions plain = accumulated_adamw();
  plain.also_composed = compositions;
  auto step = census_step(*config, plain);
  ASSERT_TRUE(step);
  ASSERT_EQ(step->also_composed_allocators.size(), compositions.size());
  for (size_t i = 0; i < compositions.size(); ++i) {
    StepOptions composed = accumulated_adamw();
    composed.composition = compositions[i];
    auto one = census_step(*config, composed);
    ASSERT_TRUE(one);
    EXPECT_EQ(one->allocator->requested_peak, one->composed_peak.bytes) << "ZeRO-" << compositions[i].zero;
    EXPECT_EQ(step->also_composed_peaks[i].bytes, one->composed_peak.bytes);
    testing::expect_same_allocator(step->also_composed_allocators[i], *one->allocator, "composed " + std::to_string(i));
  }
  // context parallelism: the K/V the ring receives, held through every pass (one block a pass)
  StepOptions cp = accumulated_adamw();
  cp.context_parallel = 2;
  auto ring = census_step(*config, cp);
  ASSERT_TRUE(ring);
  EXPECT_EQ(ring->allocator->requested_peak, ring->composed_peak.bytes);
}

// Out of memory at a device limit: the step's reserved peak is what it needs with nothing freed
// back; a limit one byte under it makes the allocator flush its cache (num_alloc_retries) or fail.
TEST(StepAllocator, OutOfMemoryAtTheDeviceLimit) {
  auto config = llama_toy();
  ASSERT_TRUE(config);
  StepOptions o = accumulated_adamw();
  o.allocator->every_storage_on_device = false;
  auto free_run = census_step(*config, o);
  ASSERT_TRUE(free_run);
  const StepAllocatorCensus& unlimited = *free_run->allocator;
  EXPECT_FALSE(unlimited.limited);
  EXPECT_FALSE(unlimited.out_of_memory);
  EXPECT_EQ(unlimited.num_alloc_retries, 0);

  o.allocator->device_limit = unlimited.reserved_peak;  // exactly enough
  auto enough = census_step(*config, o);
  ASSERT_TRUE(enough);
  EXPECT_TRUE(enough->allocator->limited);
  EXPECT_FALSE(enough->allocator->out_of_memory);
  EXPECT_EQ(enough->allocator->reserved_peak, unlimited.reserved_peak);
  EXPECT_EQ(enough->allocator->num_alloc_retries, 0);

  o.allocator->device_limit = unlimited.allocated_peak - 1;  // less than the blocks themselves need
  auto short_run = census_step(*config, o);
  ASSERT_TRUE(short_run);
  EXPECT_TRUE(short_run->allocator->out_of_memory);
  EXPECT_GE(short_run->allocator->num_alloc_retries, 1);
  EXPECT_GT(short_run->allocator->out_of_memory_request, 0);
  EXPECT_FALSE(short_run->allocator->out_of_memory_phase.empty());
  EXPECT_LE(short_run->allocator->reserved_peak, unlimited.allocated_peak - 1);
}

// A toy small enough that every storage of its step is a small-pool request (at most 1 MiB: its largest
// is the LM head's logits in fp32, 16 x 128 x 4 B = 8 KiB) and that every stream's blocks live at once fit
// one 2 MiB small segment (its allocated peak is under 1 MiB): each stream that allocates reserves one
// segment of 2 MiB, and the reserved peak counts the streams. Two layers of hidden 64, 16 tokens.
ModelConfig tiny_llama() {
  auto config = read_config(nlohmann::json{{"model_type", "llama"}, {"hidden_size", 64}, {"num_attention_heads", 4},
                                           {"num_key_value_heads", 2}, {"head_dim", 16}, {"intermediate_size", 128},
                                           {"num_hidden_layers", 2}, {"vocab_size", 128},
                                           {"max_position_embeddings", 256}});
  if (!config) throw std::runtime_error(config.refusal().message());
  return config.take();
}

StepAllocatorCensus tiny_allocator(const StepOptions& options) {
  StepOptions o = options;
  o.seq_length = 16;
  o.optimizer = StepOptimizer::kAdamW;
  o.allocator = StepAllocatorOptions{};
  auto step = census_step(tiny_llama(), o);
  if (!step) throw std::runtime_error(step.refusal().message());
  EXPECT_LT(step->allocator->allocated_peak, 1 << 20);
  return *step->allocator;
}

// FSDP2 allocates on three streams (StepStream): the compute stream (the unsharded parameters and
// gradients, the reduce-scatter input, every op's output), the all-gather copy-in stream (each unit's
// all-gather output) and the reduce-scatter stream (its output: the sharded gradients). A block freed on
// one is never handed to another, so the three each reserve their own 2 MiB: 6 MiB, where one stream
// would have held all in 2 MiB. DTensor's collectives allocate on the compute stream: 2 MiB.
TEST(StepAllocator, EachStreamHoldsItsOwnSegments) {
  constexpr int64_t kSmallSegment = 2 << 20;
  StepOptions plain;
  EXPECT_EQ(tiny_allocator(plain).reserved_peak, kSmallSegment);
  StepOptions fsdp;
  fsdp.composition.data_parallel = 2;
  fsdp.fsdp.shards = 2;
  EXPECT_EQ(tiny_allocator(fsdp).reserved_peak, 3 * kSmallSegment);
  fsdp.first_step = true;
  EXPECT_EQ(tiny_allocator(fsdp).reserved_peak, 3 * kSmallSegment);
  StepOptions dtensor;
  dtensor.tensor_parallel = 2;
  dtensor.sequence_parallel = dtensor.loss_parallel = true;
  EXPECT_EQ(tiny_allocator(dtensor).reserved_peak, kSmallSegment);
}

// Note [The first step warms the cache]: the steady step's allocator starts where the first step left
// it, its segments cached: its reserved peak is at least the first step's, and where the later step
// needs no more, it is that, reached at its setup. The Llama toy at 128 tokens, 4 micro-batches: the
// first step reserves its most in its optimizer step, where it makes AdamW's states; the steady step
// holds them from its start in blocks the first step gave them.
TEST(StepAllocator, TheSteadyStepStartsFromTheFirstStepsCache) {
  auto config = llama_toy();
  ASSERT_TRUE(config);
  StepOptions first = accumulated_adamw();
  first.allocator->every_storage_on_device = false;
  first.optimizer_impl = nn::OptimizerImpl::kForEach;
  StepOptions steady = first;
  steady.first_step = false;
  auto one = census_step(*config, first);
  auto two = census_step(*config, steady);
  ASSERT_TRUE(one && two);
  EXPECT_GE(two->allocator->reserved_peak, one->allocator->reserved_peak);
  EXPECT_EQ(two->allocator->phases.front().name, "setup");
  EXPECT_EQ(two->allocator->phases.front().reserved_at_end, two->allocator->phases.front().reserved_peak);
  EXPECT_GE(two->allocator->phases.front().reserved_peak, one->allocator->phases.back().reserved_at_end);
  EXPECT_EQ(two->allocator->requested_peak, two->analysis.peak.bytes - 39 * 4);  // the host step counts
}

}  // namespace
}  // namespace census
