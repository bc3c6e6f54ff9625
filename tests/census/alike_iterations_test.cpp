// The gated delta rule's chunk loop folded (Note [Alike iterations], ops/dispatch.h) against the same
// census run chunk by chunk (StepByStepGuard), at lengths where both run: whole chunks and ragged
// ones, the fewest chunks that fold and more. Every number a folded census gives must be the
// step-by-step run's: saved, kept and working bytes, the bytes by op class, the selective census,
// the recompute shares, FLOPs, traffic and launches by part.
#include <gtest/gtest.h>

#include "census/activations.h"
#include "census/layer_census.h"
#include "census/parts.h"
#include "census/selective_census.h"
#include "models/registry.h"
#include "ops/dispatch.h"

namespace census {
namespace {

// A Qwen3-Next linear-attention layer at small widths (the loop's shapes do not matter to the fold,
// only its count), dense or with its MoE block; or Qwen3.5's.
ModelConfig linear_attention_config(const char* model_type, bool moe) {
  nlohmann::json fields = {{"model_type", model_type},     {"hidden_size", 256},
                           {"intermediate_size", 512},     {"num_hidden_layers", 4},
                           {"linear_num_key_heads", 2},    {"linear_num_value_heads", 4},
                           {"linear_key_head_dim", 32},    {"linear_value_head_dim", 32},
                           {"linear_conv_kernel_dim", 4},  {"num_attention_heads", 4},
                           {"num_key_value_heads", 2},     {"head_dim", 64}};
  if (moe) {
    fields["num_experts"] = 8;
    fields["num_experts_per_tok"] = 2;
    fields["moe_intermediate_size"] = 64;
    fields["shared_expert_intermediate_size"] = 64;
  } else {
    fields["mlp_only_layers"] = {0, 1, 2, 3};
  }
  auto config = read_config(fields);
  if (!config) throw std::runtime_error(config.refusal().message());
  return config.take();
}

struct Everything {
  LayerCensus layer;
  SelectiveCensus selective;
  RecomputeShares shares;
  PartCounts flops;
  LayerTraffic traffic;
};

Everything census_everything(const ModelConfig& config, int64_t seq) {
  return {census_layer(config, 0, seq), census_selective(config, 0, seq), census_recomputed(config, 0, seq),
          census_flops(config, 0, seq), census_traffic(config, 0, seq)};
}

void expect_same(const Everything& folded, const Everything& oracle, const std::string& where) {
  EXPECT_EQ(folded.layer.saved_bytes, oracle.layer.saved_bytes) << where;
  EXPECT_EQ(folded.layer.kept_bytes, oracle.layer.kept_bytes) << where;
  EXPECT_EQ(folded.layer.working_bytes, oracle.layer.working_bytes) << where;
  EXPECT_EQ(folded.layer.saved_by_op, oracle.layer.saved_by_op) << where;
  EXPECT_EQ(folded.selective.kept_bytes, oracle.selective.kept_bytes) << where;
  EXPECT_EQ(folded.selective.working_bytes, oracle.selective.working_bytes) << where;
  EXPECT_EQ(folded.shares.attention_mm, oracle.shares.attention_mm) << where;
  EXPECT_EQ(folded.shares.ffn_mm, oracle.shares.ffn_mm) << where;
  EXPECT_EQ(folded.flops, oracle.flops) << where;
  EXPECT_EQ(folded.traffic.moved, oracle.traffic.moved) << where;
  EXPECT_EQ(folded.traffic.parameter, oracle.traffic.parameter) << where;
  EXPECT_EQ(folded.traffic.launches, oracle.traffic.launches) << where;
}

// Chunks of 64 tokens: 6 is the fewest that fold (one standing for two); ragged lengths pad the last.
constexpr int64_t kLengths[] = {64 * 5, 64 * 6, 64 * 6 - 1, 64 * 7 + 1, 64 * 9, 64 * 13 - 17, 64 * 24, 64 * 40 + 3};

TEST(AlikeIterations, FoldedDeltaRuleEqualsTheStepByStepRun) {
  for (const char* model_type : {"qwen3_next", "qwen3_5_text"}) {
    for (bool moe : {false, true}) {
      if (std::string(model_type) == "qwen3_5_text" && moe) continue;
      const ModelConfig config = linear_attention_config(model_type, moe);
      for (int tp : {1, 2}) {
        const ModelConfig ranked = tp_config(config, tp);
        for (int64_t seq : kLengths) {
          Everything oracle;
          {
            StepByStepGuard step_by_step;
            oracle = census_everything(ranked, seq);
          }
          const std::string where = std::string(model_type) + (moe ? " moe" : " dense") + " tp " +
                                    std::to_string(tp) + " at " + std::to_string(seq) + " tokens";
          expect_same(census_everything(ranked, seq), oracle, where);
        }
      }
    }
  }
}

// The fold is seen: the step-by-step run of many chunks grows the census's storages with the chunks,
// the folded one does not (its storage ids, one per storage made, stay put).
TEST(AlikeIterations, FoldedRunMakesAsManyStoragesAtAnyLength) {
  const ModelConfig config = linear_attention_config("qwen3_next", false);
  auto storages_made = [&](int64_t seq) {
    Session session;
    session.set_fold_alike_iterations(true);
    std::unique_ptr<DecoderLayer> layer = config.family->build_layer(config, 0);
    Tensor hidden = make_tensor(Dims{1, seq, config.hidden_size}, DType::kBFloat16, /*requires_grad=*/true);
    Tensor out = layer->forward(hidden, layer->embed_positions(hidden));
    return session.new_storage(0)->id;
  };
  EXPECT_EQ(storages_made(64 * 8), storages_made(64 * 100));
  {
    StepByStepGuard step_by_step;
    EXPECT_LT(storages_made(64 * 8), storages_made(64 * 100));
  }
}

}  // namespace
}  // namespace census
