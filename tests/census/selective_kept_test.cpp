// census_selective_kept, the forward-only selective census census activations runs, against the two
// censuses it stands for: its kept bytes must be census_selective's (which also runs the backward and
// the recompute), and the shares it reads off the same forward must be census_recomputed's (its own
// run on the layer as Transformers builds it). On every shipped config's layer kinds, at TP 1 and 2,
// where the shares cannot come from the same forward (the delta rule's triton kernel), and with eager
// experts.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "census/selective_census.h"
#include "cli/request.h"
#include "cli/shipped_models.h"
#include "models/registry.h"
#include "shipped_layer_kinds.h"

namespace census {
namespace {

ModelConfig shipped(std::string_view name) { return cli::resolve_model(std::string(name)).take(); }

void expect_kept_agrees(const ModelConfig& config, int64_t layer, int64_t seq, const std::string& where) {
  RecomputeShares shares;
  const int64_t kept = census_selective_kept(config, layer, seq, &shares);
  EXPECT_EQ(kept, census_selective(config, layer, seq).kept_bytes) << where;
  EXPECT_EQ(census_selective_kept(config, layer, seq), kept) << where << " (without shares)";
  const RecomputeShares alone = census_recomputed(config, layer, seq);
  EXPECT_EQ(shares.attention_mm, alone.attention_mm) << where;
  EXPECT_EQ(shares.ffn_mm, alone.ffn_mm) << where;
}

TEST(SelectiveKept, AgreesWithTheFullSelectiveCensusOnEveryShippedConfigAndLayerKind) {
  testing::for_each_shipped_layer_kind([](const ModelConfig& rank, int64_t layer, const std::string& where) {
    expect_kept_agrees(rank, layer, 256, where);
  });
}

TEST(SelectiveKept, TakesTheSharesFromTheirOwnRunWhereTheLayerIsNotBuiltAsTransformersBuildsIt) {
  ModelConfig triton = shipped("qwen3-next-80b-a3b");
  triton.gdn_backend = nn::GdnBackend::kTriton;
  expect_kept_agrees(triton, 0, 512, "qwen3-next, the delta rule's triton kernel");
  ModelConfig eager = shipped("qwen3-30b-a3b");
  eager.moe.experts_implementation = nn::ExpertsImplementation::kEager;
  expect_kept_agrees(eager, 0, 256, "qwen3-30b-a3b, eager experts");
}

}  // namespace
}  // namespace census
