// Promises every census keeps: the same answer whatever ran before, and a TP-2 rank keeping less
// than TP 1 but more than half of it. (Working bytes promise no such order: the reference's peak rule
// picks the moment with the parameters' gradients counted, and at short sequences both ranks peak
// where only unsplit activations are live.)
#include <gtest/gtest.h>

#include "census/activations.h"
#include "census/layer_census.h"
#include "cli/request.h"

namespace census {
namespace {

ModelConfig shipped(const char* name) { return cli::resolve_model(name).take(); }

bool same(const LayerCensus& a, const LayerCensus& b) {
  if (a.saved_bytes != b.saved_bytes || a.working_bytes != b.working_bytes || a.kept_bytes != b.kept_bytes ||
      a.saved_by_op != b.saved_by_op || a.saved.size() != b.saved.size())
    return false;
  for (size_t i = 0; i < a.saved.size(); ++i)
    if (a.saved[i].bytes != b.saved[i].bytes || a.saved[i].module != b.saved[i].module ||
        a.saved[i].shape != b.saved[i].shape)
      return false;
  return true;
}

TEST(Determinism, SameCensusTwiceAndAfterOthers) {
  const ModelConfig llama = shipped("llama-3.1-8b");
  const LayerCensus first = census_layer(llama, 0, 2048, true);
  census_layer(shipped("qwen3-32b"), 3, 1000, true);
  census_activations(shipped("mistral-7b-v0.3"), 512);
  const LayerCensus again = census_layer(llama, 0, 2048, true);
  EXPECT_TRUE(same(first, again));
  EXPECT_TRUE(same(census_layer(llama, 0, 2048, true), again));
}

TEST(TensorParallel, Tp2RankKeepsLessThanTp1AndMoreThanHalf) {
  for (const char* name : {"llama-3.1-8b", "llama-3.1-70b", "mistral-7b-v0.3", "qwen2.5-7b", "qwen3-8b", "qwen3-32b"}) {
    const ModelConfig config = shipped(name);
    for (int64_t seq : {512, 4096}) {
      const LayerCensus one = census_layer(config, 0, seq);
      const LayerCensus two = census_layer(tp_config(config, 2), 0, seq);
      EXPECT_LT(two.saved_bytes, one.saved_bytes) << name << " " << seq;
      EXPECT_GT(2 * two.saved_bytes, one.saved_bytes) << name << " " << seq;
    }
  }
}

TEST(TensorParallel, TpConfigDividesHeadsAndWidthsKeepingHeadDim) {
  const ModelConfig config = shipped("qwen3-32b");
  const ModelConfig rank = tp_config(config, 8);
  EXPECT_EQ(rank.num_attention_heads, config.num_attention_heads / 8);
  EXPECT_EQ(rank.num_key_value_heads, 1);
  EXPECT_EQ(rank.intermediate_size, config.intermediate_size / 8);
  EXPECT_EQ(rank.head_dim, config.head_dim);
  EXPECT_EQ(tp_config(config, 16).num_key_value_heads, 1);  // fewer KV heads than ranks: one each
}

// The per-token split reassembles what one TP-1 layer saves, in total and by op.
TEST(Activations, RecordSplitsReassembleTheTp1Bytes) {
  const ModelConfig config = shipped("llama-3.1-8b");
  const auto kinds = census_activations(config, 4096);
  ASSERT_EQ(kinds.size(), 1u);
  const KindActivations& k = kinds[0].second;
  const LayerCensus one = census_layer(config, 0, 4096);
  EXPECT_EQ((k.saved + k.saved_tp) * 4096, static_cast<double>(one.saved_bytes));
  double ops = 0;
  for (const auto& [op, value] : k.ops) ops += value + k.ops_tp.at(op);
  EXPECT_EQ(ops * 4096, static_cast<double>(one.saved_bytes));
}

}  // namespace
}  // namespace census
