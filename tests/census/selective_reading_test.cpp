// The selective census's kept bytes read off the plain census's forward (census/selective_reading.h),
// against the checkpointed forward they stand for (census_selective_kept) and the shares against
// census_recomputed's own run: on every oracle case's config and every shipped config's layer kinds,
// at TP 1 and 2. The reading must leave the plain census's own numbers as they were, and must answer
// wherever the layer takes no lone arguments (so that these comparisons compare something). Then the
// reader on hand-made regions, derived by hand, and the storage it cannot account for.
//
// Legend for the hand-made regions: S rows, H input width, M hidden width; bf16 is 2 bytes.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "census/layer_census.h"
#include "census/measurement.h"
#include "census/selective_census.h"
#include "census/selective_reading.h"
#include "cli/request.h"
#include "cli/shipped_models.h"
#include "cli/train_yaml.h"
#include "models/registry.h"
#include "shipped_layer_kinds.h"
#include "ops/ops.h"
#include "oracle_cases.h"

namespace census {
namespace {

// Layers that take lone arguments (DecoderLayer::has_lone_arguments): the reader leaves them to the
// checkpointed forward.
bool takes_lone_arguments(const ModelConfig& config, int64_t layer) {
  Session session;  // building a layer needs a census's world
  return config.family->build_layer(config, layer)->has_lone_arguments();
}

void expect_reading_agrees(const ModelConfig& config, int64_t layer, int64_t seq, const std::string& where) {
  SelectiveReading reading;
  reading.wants_shares = true;
  const LayerCensus read = census_layer(config, layer, seq, /*explain=*/false, &reading);
  const LayerCensus plain = census_layer(config, layer, seq);
  EXPECT_EQ(read.saved_bytes, plain.saved_bytes) << where;
  EXPECT_EQ(read.working_bytes, plain.working_bytes) << where;
  EXPECT_EQ(read.kept_bytes, plain.kept_bytes) << where;
  EXPECT_EQ(read.saved_by_op, plain.saved_by_op) << where;

  EXPECT_EQ(reading.read, !takes_lone_arguments(config, layer) && config.replacements.empty()) << where;
  RecomputeShares own_shares;
  const int64_t own = census_selective_kept(config, layer, seq, &own_shares);
  if (reading.read) {
    EXPECT_EQ(reading.kept_bytes, own) << where;
    EXPECT_EQ(reading.shares.has_value(), recompute_prices_as_built(config)) << where;
  }
  RecomputeShares shares;
  EXPECT_EQ(selective_kept(config, layer, seq, reading, &shares), own) << where;
  const RecomputeShares alone = census_recomputed(config, layer, seq);
  EXPECT_EQ(shares.attention_mm, alone.attention_mm) << where;
  EXPECT_EQ(shares.ffn_mm, alone.ffn_mm) << where;
}

TEST(SelectiveReading, AgreesWithTheCheckpointedForwardOnEveryOracleCase) {
  std::vector<std::string> cases;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(CENSUS_TEST_DATA) + "/oracle"))
    if (entry.path().extension() == ".json") cases.push_back(entry.path().stem().string());
  ASSERT_GE(cases.size(), 100u);
  std::set<std::string> families;
  for (const std::string& name : cases) {
    const nlohmann::json oracle = testing::oracle_case(name);
    if (!oracle.contains("layer_index")) continue;  // a stack case: its layers are the layer cases'
    ModelConfig config = testing::oracle_config(oracle);
    if (oracle.contains("gdn_backend") && oracle.at("gdn_backend").is_string() &&
        oracle.at("gdn_backend").get<std::string>() != "eager")
      config.gdn_backend = nn::GdnBackend::kTriton;
    const int64_t layer = oracle.at("layer_index").get<int64_t>();
    const int64_t seq = oracle.at("seq_length").get<int64_t>();
    if (config.family->stack_only != nullptr && config.family->stack_only(config, layer) != nullptr) continue;
    families.insert(config.model_type);
    for (int64_t tp : {1, 2}) expect_reading_agrees(tp_config(config, tp), layer, seq, name + " TP " + std::to_string(tp));
  }
  EXPECT_GE(families.size(), 30u);
}

TEST(SelectiveReading, AgreesWithTheCheckpointedForwardOnEveryShippedConfigAndLayerKind) {
  testing::for_each_shipped_layer_kind([](const ModelConfig& rank, int64_t layer, const std::string& where) {
    expect_reading_agrees(rank, layer, 256, where);
  });
}

// Long enough that the delta rule's chunk loop folds its alike iterations (Note [Alike iterations]):
// the outputs the policy caches inside the standing iteration stand for every iteration's.
TEST(SelectiveReading, AgreesWhereTheChunkLoopFolds) {
  for (const char* name : {"qwen3-next-80b-a3b", "qwen3.5-27b"}) {
    const ModelConfig config = cli::resolve_model(name).take();
    for (int64_t tp : {1, 2}) expect_reading_agrees(tp_config(config, tp), 0, 4096, std::string(name) + " at 4096 tokens");
  }
}

// A train.yaml's fused modules (GroupedExperts keeps its group list as an attribute, and its matmuls
// save it): not read, the checkpointed forward runs.
TEST(SelectiveReading, LeavesATrainYamlsFusedModulesToTheCheckpointedForward) {
  ModelConfig config = cli::resolve_model("qwen3-30b-a3b").take();
  config.replacements = cli::read_train_yaml(std::string(CENSUS_TEST_DATA) + "/recipes/qwen3_moe_train.yaml").take();
  ASSERT_FALSE(config.replacements.empty());
  for (int64_t tp : {1, 2}) expect_reading_agrees(tp_config(config, tp), 0, 256, "qwen3-30b-a3b with its train.yaml");
}

TEST(SelectiveReading, AgreesUnderTheDeltaRulesKernelAndEagerExperts) {
  ModelConfig triton = cli::resolve_model("qwen3-next-80b-a3b").take();
  triton.gdn_backend = nn::GdnBackend::kTriton;
  expect_reading_agrees(triton, 0, 512, "qwen3-next, the delta rule's triton kernel");
  ModelConfig eager = cli::resolve_model("qwen3-30b-a3b").take();
  eager.moe.experts_implementation = nn::ExpertsImplementation::kEager;
  expect_reading_agrees(eager, 0, 256, "qwen3-30b-a3b, eager experts");
}

constexpr int64_t S = 64, H = 16, M = 32;

// x (S, H) needing grad; h = x W1 (mm, the policy's 1st: cached), g = h W2 (mm, 2nd: recomputed),
// out = g * 2 (mul, recomputed).
//   kept under the checkpoint: x (2SH) and the cached h (2SM); the positions: none.
//   The plain forward's end: x; h (saved by g's mm for W2's gradient); g is saved by nothing (mul by
//   a number saves no tensor) and dies; out is the output. Everything live is accounted for.
TEST(SelectiveReader, ReadsTheInputAndTheCachedOutputs) {
  Measurement measurement;
  const Tensor w1 = make_parameter(Dims{H, M}, "w1");
  const Tensor w2 = make_parameter(Dims{M, M}, "w2");
  Tensor x = make_tensor(Dims{S, H}, DType::kBFloat16, /*requires_grad=*/true);
  measurement.track(x);
  SelectiveReading reading;
  measurement.run_forward([&] {
    SelectiveReader reader(nullptr);
    measurement.add_observer(&reader);
    const Tensor h = ops::mm(x, w1);
    Tensor out = ops::mul(ops::mm(h, w2), 2.0);
    measurement.remove_observer(&reader);
    reader.read(x, out, nn::PositionEmbeddings{}, measurement.live(), measurement.saved(), reading);
    return out;
  });
  ASSERT_TRUE(reading.read);
  EXPECT_EQ(reading.kept_bytes, 2 * S * H + 2 * S * M);
  EXPECT_FALSE(reading.shares.has_value());
}

// As above, with the region's first product also kept by something no node is (a module's state):
// the checkpoint would keep it too, and the plain forward's end cannot tell. The reader declines.
TEST(SelectiveReader, DeclinesAStorageLiveThatNoNodeSaved) {
  Measurement measurement;
  const Tensor w1 = make_parameter(Dims{H, M}, "w1");
  Tensor x = make_tensor(Dims{S, H}, DType::kBFloat16, /*requires_grad=*/true);
  measurement.track(x);
  Tensor state;  // outlives the forward
  SelectiveReading reading;
  reading.read = true;
  measurement.run_forward([&] {
    SelectiveReader reader(nullptr);
    measurement.add_observer(&reader);
    const Tensor h = ops::mm(x, w1);
    state = ops::neg(h);  // neg saves nothing
    Tensor out = ops::mul(h, 2.0);
    measurement.remove_observer(&reader);
    reader.read(x, out, nn::PositionEmbeddings{}, measurement.live(), measurement.saved(), reading);
    return out;
  });
  EXPECT_FALSE(reading.read);
}

}  // namespace
}  // namespace census
