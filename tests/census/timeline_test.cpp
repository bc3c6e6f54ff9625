// The memory timeline agrees with the census it draws: the saved bands at the forward's end are
// census_layer's saved bytes (class by class), the backward's highest moment is its working bytes plus
// the parameters' gradients then live, and buckets keep every column's maximum.
#include <gtest/gtest.h>

#include <algorithm>

#include "census/layer_census.h"
#include "census/selective_census.h"
#include "census/timeline.h"
#include "cli/request.h"
#include "cli/shipped_models.h"
#include "shipped_layer_kinds.h"

namespace census {
namespace {

ModelConfig shipped(std::string_view name) { return cli::resolve_model(std::string(name)).take(); }

// Every property the chart relies on, for one layer.
void expect_timeline_agrees(const ModelConfig& config, int64_t layer_index, int64_t seq_length) {
  SCOPED_TRACE(config.model_type + " layer " + std::to_string(layer_index) + " at " + std::to_string(seq_length));
  const LayerCensus census = census_layer(config, layer_index, seq_length);
  const Timeline t = census_timeline(config, layer_index, seq_length);

  EXPECT_EQ(t.saved_bytes, census.saved_bytes);
  EXPECT_EQ(t.working_bytes, census.working_bytes);
  for (size_t op = 0; op < kSavedOpCount; ++op) EXPECT_EQ(t.forward_end.bytes[op], census.saved_by_op[op]) << op;
  // Nothing the backward makes or hands to a parameter is live before it.
  EXPECT_EQ(t.forward_end.bytes[kBackwardBand], 0);
  EXPECT_EQ(t.forward_end.bytes[kParameterGradBand], 0);
  // Every storage live then but the output is what the census calls kept.
  EXPECT_EQ(t.forward_end.total(), census.kept_bytes);
  EXPECT_EQ(t.kept_bytes, census.kept_bytes);

  ASSERT_EQ(static_cast<int64_t>(t.columns.size()), t.forward_ops + t.backward_ops);
  ASSERT_GT(t.forward_ops, 0);
  ASSERT_GT(t.backward_ops, 0);
  for (size_t c = 0; c < t.columns.size(); ++c) EXPECT_EQ(t.columns[c].first_op, static_cast<int64_t>(c));

  // The backward's highest moment is the peak the census reports, parameters' gradients counted to
  // find it and then set apart.
  int64_t highest = 0;
  for (size_t c = t.forward_ops; c < t.columns.size(); ++c) highest = std::max(highest, t.columns[c].at_max.total());
  EXPECT_EQ(highest, t.at_peak.total());
  EXPECT_EQ(t.at_peak.activations(), census.working_bytes);
  EXPECT_EQ(t.columns[t.peak_op].at_max.total(), t.at_peak.total());
  EXPECT_GE(t.peak_op, t.forward_ops);

  // The storages listed at the peak are the bands' bytes then, one by one.
  int64_t listed = 0, listed_grads = 0;
  for (const LiveStorage& s : t.live_at_peak) {
    listed += s.bytes;
    if (s.band == "parameter grads") listed_grads += s.bytes;
    EXPECT_GT(s.bytes, 0);
  }
  EXPECT_EQ(listed, t.at_peak.total());
  EXPECT_EQ(listed_grads, t.at_peak.bytes[kParameterGradBand]);
  EXPECT_TRUE(std::is_sorted(t.live_at_peak.begin(), t.live_at_peak.end(),
                             [](const LiveStorage& a, const LiveStorage& b) { return a.bytes > b.bytes; }));

  int64_t by_module = 0;
  for (const auto& [module, bytes] : t.saved_by_module) by_module += bytes;
  EXPECT_EQ(by_module, census.saved_bytes);
}

TEST(Timeline, AgreesWithTheLayerCensusOnEveryShippedConfigAndLayerKind) {
  for (const cli::ShippedModel& model : cli::shipped_models()) {
    const ModelConfig config = shipped(model.name);
    int64_t first = 0;
    std::vector<std::string> seen;
    for (const LayerGroup& group : layer_stack(config)) {
      if (group.mtp) continue;
      if (testing::runs_alone(config, first) && std::find(seen.begin(), seen.end(), group.kind) == seen.end()) {
        seen.push_back(group.kind);
        expect_timeline_agrees(config, first, 1024);
      }
      first += group.count;
    }
  }
}

TEST(Timeline, AgreesAtTheDefaultLengthAndUnderOptions) {
  expect_timeline_agrees(shipped("llama-3.1-8b"), 0, 4096);
  expect_timeline_agrees(tp_config(shipped("qwen3-32b"), 2), 5, 4096);
  ModelConfig eager = shipped("qwen3-30b-a3b");
  eager.moe.experts_implementation = nn::ExpertsImplementation::kEager;
  expect_timeline_agrees(eager, 0, 512);
  ModelConfig triton = shipped("qwen3-next-80b-a3b");
  triton.gdn_backend = nn::GdnBackend::kTriton;
  expect_timeline_agrees(triton, 0, 2048);
  ModelConfig cuda = shipped("gemma-2-9b");
  cuda.kernels = nn::KernelProfile::kCuda;
  expect_timeline_agrees(cuda, 1, 1000);
}

// Llama's layer does not save its input (input_layernorm saves the fp32 copy it makes): at the
// forward's end the forward band holds the input, 1024 tokens x 4096 x 2 bytes, and the rotary
// embedding's inv_freq[None, :], 64 fp32 (256 bytes), still held by the positions' expand; the input is
// live from the first column on.
TEST(Timeline, TheUnsavedInputIsTheForwardBandAtTheForwardsEnd) {
  const ModelConfig llama = shipped("llama-3.1-8b");
  const Timeline t = census_timeline(llama, 0, 1024);
  const int64_t input = int64_t{1024} * 4096 * 2;
  EXPECT_EQ(t.forward_end.bytes[kForwardBand], input + 64 * 4);
  EXPECT_GE(t.columns.front().at_max.bytes[kForwardBand], input);
  const auto it = std::find_if(t.live_at_peak.begin(), t.live_at_peak.end(),
                               [](const LiveStorage& s) { return s.aten_op == "input"; });
  ASSERT_NE(it, t.live_at_peak.end());
  EXPECT_EQ(it->bytes, input);
  EXPECT_EQ(it->band, "forward");
}

// Under selective checkpointing: the forward's end holds what census_selective keeps, the backward's
// highest moment its working bytes plus the parameters' gradients. The checkpoint saves the layer's
// input (other); the re-run forward's tensors are kept by its holders, not through the pack hook, so
// no saved band grows in the backward.
void expect_selective_timeline_agrees(const ModelConfig& config, int64_t layer_index, int64_t seq_length) {
  SCOPED_TRACE(config.model_type + " selective, layer " + std::to_string(layer_index));
  const SelectiveCensus census = census_selective(config, layer_index, seq_length);
  const Timeline t = census_timeline(config, layer_index, seq_length, /*selective=*/true);
  EXPECT_TRUE(t.selective);
  EXPECT_EQ(t.kept_bytes, census.kept_bytes);
  EXPECT_EQ(t.working_bytes, census.working_bytes);
  EXPECT_EQ(t.at_peak.activations(), census.working_bytes);
  int64_t highest = 0, saved_in_backward = 0;
  for (size_t c = t.forward_ops; c < t.columns.size(); ++c) {
    highest = std::max(highest, t.columns[c].at_max.total());
    saved_in_backward = std::max(saved_in_backward, t.columns[c].at_max.saved());
  }
  EXPECT_EQ(highest, t.at_peak.total());
  EXPECT_EQ(t.forward_end.saved(), t.forward_end.bytes[static_cast<size_t>(SavedOp::kOther)]);
  EXPECT_EQ(t.forward_end.saved(), int64_t{seq_length} * config.hidden_size * 2) << "the input, bf16";
  EXPECT_LE(saved_in_backward, t.forward_end.saved());
  int64_t listed = 0;
  for (const LiveStorage& s : t.live_at_peak) listed += s.bytes;
  EXPECT_EQ(listed, t.at_peak.total());
}

TEST(Timeline, UnderSelectiveCheckpointingAgreesWithItsCensus) {
  for (const char* name : {"llama-3.1-8b", "qwen3-30b-a3b", "deepseek-v3", "qwen3-next-80b-a3b", "gemma-2-9b", "gpt-oss-20b"}) {
    const ModelConfig config = shipped(name);
    expect_selective_timeline_agrees(config, 0, 1024);
    expect_selective_timeline_agrees(tp_config(config, 2), config.num_hidden_layers - 1, 2048);
  }
}

TimelineColumn column(int64_t op, int64_t forward, int64_t grads) {
  TimelineColumn c;
  c.first_op = c.last_op = op;
  c.at_max.bytes[kForwardBand] = forward;
  c.at_max.bytes[kParameterGradBand] = grads;
  return c;
}

TEST(TimelineBuckets, KeepEachBucketsMaximumAndCoverEveryOp) {
  std::vector<TimelineColumn> columns;
  // A saw with one narrow spike: ten columns per pixel at width 100.
  for (int64_t op = 0; op < 1000; ++op) columns.push_back(column(op, op % 7 * 10, op % 3));
  columns[537].at_max.bytes[kForwardBand] = 1'000'000;
  const std::vector<TimelineColumn> buckets = bucket_columns(columns, 100);
  ASSERT_EQ(buckets.size(), 100u);
  int64_t next = 0, highest = 0;
  for (const TimelineColumn& b : buckets) {
    EXPECT_EQ(b.first_op, next);
    next = b.last_op + 1;
    int64_t expected = 0;
    for (int64_t op = b.first_op; op <= b.last_op; ++op) expected = std::max(expected, columns[op].at_max.total());
    EXPECT_EQ(b.at_max.total(), expected);
    highest = std::max(highest, b.at_max.total());
  }
  EXPECT_EQ(next, 1000);
  EXPECT_EQ(highest, 1'000'000 + 537 % 3);
  EXPECT_EQ(buckets[53].at_max.bytes[kForwardBand], 1'000'000);  // 537 falls in ops [530, 539]
}

TEST(TimelineBuckets, FewerColumnsThanPixelsStayAsTheyAre) {
  std::vector<TimelineColumn> columns = {column(0, 5, 0), column(1, 9, 1), column(2, 2, 0)};
  const auto buckets = bucket_columns(columns, 880);
  ASSERT_EQ(buckets.size(), 3u);
  EXPECT_EQ(buckets[1].at_max.total(), 10);
}

TEST(TimelineBuckets, UnevenSplitKeepsTheMaximum) {
  std::vector<TimelineColumn> columns;
  for (int64_t op = 0; op < 1001; ++op) columns.push_back(column(op, (op * 7919) % 1009, 0));
  const auto buckets = bucket_columns(columns, 333);
  EXPECT_LE(buckets.size(), 333u);
  int64_t highest = 0, highest_bucket = 0;
  for (const auto& c : columns) highest = std::max(highest, c.at_max.total());
  for (const auto& b : buckets) highest_bucket = std::max(highest_bucket, b.at_max.total());
  EXPECT_EQ(highest_bucket, highest);
  EXPECT_EQ(buckets.back().last_op, 1000);
}

}  // namespace
}  // namespace census
