// DeepSeek-V3.2 at its own shape (DeepseekV32Config's defaults: hidden 7168, 128 heads, q_lora_rank
// 1536, kv_lora_rank 512, Dn 128, Dr 64, Dv 128, the indexer's 64 heads of 128 and top-2048), its
// dense layer at 4096 tokens: the reference's two figures, and where they come from.
#include <gtest/gtest.h>

#include "census/layer_census.h"
#include "census/parts.h"
#include "census/selective_census.h"
#include "models/registry.h"

namespace census {
namespace {

ModelConfig defaults(const char* model_type) {
  auto config = read_config(nlohmann::json{{"model_type", model_type}});
  if (!config) throw std::runtime_error(config.refusal().message());
  return config.take();
}

constexpr int64_t kTokens = 4096;

// Plain, the dense layer keeps 516368 bytes a token: the indexer runs under no_grad and saves
// nothing, so the layer keeps what DeepSeek-V3's dense layer of the same shape keeps.
TEST(DeepseekV32Anchor, DenseLayerKeeps516368BytesATokenPlain) {
  const LayerCensus v32 = census_layer(defaults("deepseek_v32"), 0, kTokens);
  EXPECT_EQ(v32.saved_bytes, 516368 * kTokens);
  EXPECT_EQ(v32.saved_bytes, census_layer(defaults("deepseek_v3"), 0, kTokens).saved_bytes);
}

// Under the selective policy it keeps 1192192 bytes a token, 2.3 times as much: the policy saves the
// outputs of the matmuls it saves in the indexer too, although no backward reads them. Beyond what
// DeepSeek-V3's selective layer keeps (110720 a token), per token:
//   scores  bmm (S, Hi, S) fp32      64 * 4096 * 4 = 1048576
//   index   bmm (S, 1, S) fp32            4096 * 4 =   16384
//   wq_b    mm (S, Hi*Di) bf16      64 * 128 * 2 =   16384
//   weights_proj  mm (S, Hi) bf16          64 * 2 =     128
//                                                   1081472   -> 110720 + 1081472 = 1192192
TEST(DeepseekV32Anchor, DenseLayerKeeps1192192BytesATokenSelective) {
  const SelectiveCensus v32 = census_selective(defaults("deepseek_v32"), 0, kTokens);
  EXPECT_EQ(v32.kept_bytes, 1192192 * kTokens);
  const SelectiveCensus v3 = census_selective(defaults("deepseek_v3"), 0, kTokens);
  EXPECT_EQ(v3.kept_bytes, 110720 * kTokens);
  EXPECT_EQ(v32.kept_bytes - v3.kept_bytes, (64 * 4096 * 4 + 4096 * 4 + 64 * 128 * 2 + 64 * 2) * kTokens);
}

// The indexer's FLOPs at that shape, beyond DeepSeek-V3's layer (S = 4096, H = 7168, Rq = 1536,
// Hi = 64, Di = 128):
//   attention (its projections): wq_b 2 S Rq Hi Di + wk 2 S H Di + weights_proj 2 S H Hi
//   linrec (its weightless bmm):  scores 2 S Hi Di S + index 2 S Hi S
// The scores the attention kernel runs stay dense (the flash contract takes no top-k).
TEST(DeepseekV32Anchor, IndexerFlopsByPart) {
  const PartCounts v32 = census_flops(defaults("deepseek_v32"), 0, kTokens);
  const PartCounts v3 = census_flops(defaults("deepseek_v3"), 0, kTokens);
  const int64_t s = kTokens, h = 7168, rq = 1536, hi = 64, di = 128;
  EXPECT_EQ(v32.at("attention") - v3.at("attention"), 2 * s * rq * hi * di + 2 * s * h * di + 2 * s * h * hi);
  EXPECT_EQ(v32.at("linrec"), 2 * s * hi * di * s + 2 * s * hi * s);
  EXPECT_EQ(v3.count("linrec"), 0u);
  EXPECT_EQ(v32.at("scores"), v3.at("scores"));
  EXPECT_EQ(v32.at("ffn"), v3.at("ffn"));
}

}  // namespace
}  // namespace census
