// Note [Recycled buffers] (util/recycled.h): a step's log takes the buffers an earlier step gave back,
// on any thread. The spares are handed out largest first and emptied, and a step's figures do not
// depend on what ran before it or where.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

#include "cli/shipped_models.h"
#include "models/registry.h"
#include "step/step_census.h"
#include "step_expect_same.h"
#include "util/recycled.h"

namespace census {
namespace {

struct TestOwner {};

TEST(RecycledBuffers, TheLargestSpareIsTakenFirstAndEmpty) {
  LargeVector<int> small(10, 1), large(1000, 2);
  recycle_vector<TestOwner>(small);
  recycle_vector<TestOwner>(large);
  auto take = [] { return reused_vector<TestOwner, int>(); };
  const LargeVector<int> first = take();
  EXPECT_TRUE(first.empty());
  EXPECT_GE(first.capacity(), 1000u);
  const LargeVector<int> second = take();
  EXPECT_TRUE(second.empty());
  EXPECT_GE(second.capacity(), 10u);
  EXPECT_LT(second.capacity(), 1000u);
  EXPECT_EQ(take().capacity(), 0u);  // none left
}

TEST(RecycledBuffers, SixteenAreKeptTheSmallestLetGo) {
  for (size_t n = 1; n <= 20; ++n) {
    LargeVector<int> v(n * 100);
    recycle_vector<TestOwner>(v);
  }
  auto take = [] { return reused_vector<TestOwner, int>(); };
  for (size_t n = 20; n > 4; --n) EXPECT_GE(take().capacity(), n * 100) << n;
  EXPECT_EQ(take().capacity(), 0u);
}

ModelConfig llama_layers(int64_t layers) {
  for (const cli::ShippedModel& model : cli::shipped_models()) {
    if (model.name != "llama-3.1-8b") continue;
    nlohmann::json json = nlohmann::json::parse(model.json);
    json["num_hidden_layers"] = layers;
    auto config = read_config(json);
    if (!config) throw std::runtime_error(config.refusal().message());
    return config.take();
  }
  throw std::runtime_error("no shipped llama-3.1-8b");
}

StepCensus step(const ModelConfig& config, int64_t micro_batches) {
  StepOptions o;
  o.seq_length = 512;
  o.micro_batches = micro_batches;
  o.optimizer = StepOptimizer::kAdamW;
  o.recompute = Recompute::kSelective;
  o.allocator = StepAllocatorOptions();
  auto result = census_step(config, o);
  if (!result) throw std::runtime_error(result.refusal().message());
  return result.take();
}

// A small step, then a larger one, then the small one again here and on another thread: the later
// ones run on the buffers the first gave back (the larger one's grown past them), and every figure is
// the first run's.
TEST(StepRecycled, AStepIsTheSameWhateverRanBeforeItAndWhere) {
  const ModelConfig two = llama_layers(2), four = llama_layers(4);
  const StepCensus first = step(two, 1);
  auto take = [] { return reused_vector<StepBytes, int32_t>(); };
  LargeVector<int32_t> spare = take();  // the first step's, given back
  EXPECT_GT(spare.capacity(), 0u);
  recycle_vector<StepBytes>(spare);
  const StepCensus larger = step(four, 4);
  EXPECT_GT(larger.analysis.events, first.analysis.events);
  const StepCensus again = step(two, 1);
  testing::expect_same_step_census(first, again, "again", /*same_events=*/true);
  testing::expect_same_allocator(*first.allocator, *again.allocator, "again");
  std::optional<StepCensus> elsewhere;
  std::thread([&] { elsewhere.emplace(step(two, 1)); }).join();
  testing::expect_same_step_census(first, *elsewhere, "on another thread", /*same_events=*/true);
  testing::expect_same_allocator(*first.allocator, *elsewhere->allocator, "on another thread");
}

}  // namespace
}  // namespace census
