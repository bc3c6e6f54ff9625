// DeepSeek-V4: the oracle's stack cases beside what the golden stack test checks (the kinds the model's
// layer types make, every layer refused alone, the refused architecture), the config's legacy fields,
// and the hyper-connection's saved bytes at DeepSeek-V4-Flash's shape derived op by op.
#include <gtest/gtest.h>

#include "census/output_census.h"
#include "census/saved_tensors.h"
#include "census/stack_census.h"
#include "nn/hyper_connection.h"
#include "oracle_cases.h"

namespace census {
namespace {

using testing::oracle_case;
using testing::oracle_config;

TEST(DeepseekV4, KindsAreTheOraclesLayerKinds) {
  for (const char* name : {"deepseek_v4_stack_h256_s64", "deepseek_v4_stack_h256_s128"}) {
    const nlohmann::json oracle = oracle_case(name);
    const ModelConfig config = oracle_config(oracle);
    EXPECT_EQ(layer_kinds(config), oracle.at("layer_kinds").get<std::vector<std::string>>()) << name;
    for (const auto& [kind, record] : oracle.at("census_activations").items())
      for (const auto& layer : record.at("layers")) EXPECT_EQ(layer_kind(config, layer.get<int64_t>()), kind) << name;
  }
}

// The oracle records the reference's refusal of every kind's first layer; Census refuses every layer.
TEST(DeepseekV4, EveryLayerIsStackOnly) {
  const nlohmann::json oracle = oracle_case("deepseek_v4_stack_h256_s64");
  const ModelConfig config = oracle_config(oracle);
  for (const auto& [kind, entry] : oracle.at("single_layer_census").items()) {
    EXPECT_TRUE(entry.contains("refused")) << kind;
    EXPECT_NE(config.family->stack_only(config, entry.at("layer").get<int64_t>()), nullptr) << kind;
  }
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) EXPECT_NE(config.family->stack_only(config, i), nullptr);
}

TEST(DeepseekV4, AnArchitectureTransformersDoesNotBuildIsRefused) {
  nlohmann::json json = oracle_case("deepseek_v4_stack_h256_s64").at("config");
  json["architectures"] = {"DeepseekV41ForCausalLM"};
  const auto refused = read_config(json);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.refusal().field, "architectures");
  EXPECT_NE(refused.refusal().advice.find("DeepseekV41ForCausalLM"), std::string::npos);
  json["architectures"] = {"DeepseekV4ForCausalLM"};
  EXPECT_TRUE(read_config(json).ok());
}

TEST(DeepseekV4, LayerPatternsMustFitTheLayers) {
  nlohmann::json json = oracle_case("deepseek_v4_stack_h256_s64").at("config");
  json["mlp_layer_types"] = {"hash_moe", "moe"};
  EXPECT_EQ(read_config(json).refusal().field, "mlp_layer_types");
  json = oracle_case("deepseek_v4_stack_h256_s64").at("config");
  json["layer_types"][1] = "full_attention";
  EXPECT_EQ(read_config(json).refusal().field, "layer_types");
}

// The checkpoints' legacy fields, as DeepseekV4Config.__post_init__ folds them: compress_ratios per
// layer (one more than the layers, the MTP layer's, cut off), num_hash_layers, qk_rope_head_dim.
TEST(DeepseekV4, LegacyFieldsFoldIn) {
  const nlohmann::json json = {{"model_type", "deepseek_v4"}, {"num_hidden_layers", 4}, {"head_dim", 512},
                               {"qk_rope_head_dim", 64},      {"num_hash_layers", 3},   {"compress_ratios", {128, 128, 4, 0, 0}}};
  const auto config = read_config(json);
  ASSERT_TRUE(config.ok()) << config.refusal().message();
  EXPECT_EQ(layer_kinds((*config)),
            (std::vector<std::string>{"heavily_compressed_attention+hash_moe", "heavily_compressed_attention+hash_moe",
                                      "compressed_sparse_attention+hash_moe", "sliding_attention+moe"}));
  EXPECT_EQ((*config).deepseek_v4->compress_rope_dim, 64);
  EXPECT_EQ((*config).moe.moe_intermediate_size, 2048);
  EXPECT_EQ((*config).intermediate_size, 0);  // the alias is divided once, as moe_intermediate_size
}

// attn_hc at DeepSeek-V4-Flash's shape (H = 4096, hc_mult M = 4, 20 Sinkhorn rounds), S = 4096 tokens,
// bf16 streams (B, S, M, H), from the config (fp32 modules only through from_pretrained). Per token:
//   streams.flatten(2).float()        M*H fp32        16384 * 4 = 65536   pow, the norm's mul
//   rsqrt(mean(x^2) + eps)            1 fp32                        4     rsqrt, the norm's mul
//   x * r (the mixing linear's input) M*H fp32                   65536    mm
//   mix = flat @ fn.float()^T         (2+M)*M = 24 fp32              96   the three scale multiplies
//   sigmoid(pre), sigmoid(post)       2 x M fp32                     32   each sigmoid
//   softmax(comb)                     M*M fp32                       64   softmax
//   39 Sinkhorn divisions (1 + 2 * 19): each numerator M*M and denominator M fp32
//                                     39 * (64 + 16)               3120   div
//   pre + eps                         M fp32                         16   the collapse's multiply
//   the streams                       M*H bf16                    32768   the collapse's multiply
//   = 167172 bytes a token, plus fn.float(): 24 x 16384 fp32 = 1572864 bytes once (a copy, not the
//   parameter, so it counts).
TEST(DeepseekV4, HyperConnectionSavedBytesDerived) {
  constexpr int64_t kSeq = 4096, kHidden = 4096, kMult = 4;
  Session session;
  SavedTensors saved;
  session.add_observer(&saved);
  nn::ParameterList params;
  const nn::HyperConnection attn_hc("attn_hc", {kMult, kHidden, 20, 1e-6, 1e-6}, params);
  const Tensor streams = make_tensor(Dims{1, kSeq, kMult, kHidden}, DType::kBFloat16, /*requires_grad=*/true);
  const nn::HyperConnection::Output out = attn_hc.forward(streams);
  int64_t bytes = 0;
  for (const SavedStorage& storage : saved.storages()) bytes += storage.bytes;
  const int64_t per_token = 65536 + 4 + 65536 + 96 + 32 + 64 + 39 * (64 + 16) + 16 + 32768;
  EXPECT_EQ(per_token, 167172);
  EXPECT_EQ(bytes, per_token * kSeq + 24 * kMult * kHidden * 4);
  EXPECT_EQ(out.collapsed.sizes(), (Dims{1, kSeq, kHidden}));
}

// A sliding layer (no compressor, the "main" rope) keeps less than a heavily compressed one by what
// the HCA compressor saves, at the toy's shape (S = 64, D = 64, m = 32 so W = 2 windows, Dr = 16):
//   kv_proj's output kv               64 x 64 bf16          8192   the weighted sum's multiply
//   softmax(gate + position_bias)     2 x 32 x 64 fp32     16384   softmax
//   its bf16 copy                     2 x 32 x 64 bf16      8192   the weighted sum's multiply
//   kv_norm: fp32 copy, rsqrt, bf16   2x64x4 + 2x4 + 2x64x2  776   the norm's pow, rsqrt and muls
//   the rotary's repeated cos, sin    2 x (2 x 16) bf16      128   the rotary's multiplies
//   the attention's K = V, 2 rows longer  2 x 64 bf16        256   the kernel
//   = 33928 bytes
TEST(DeepseekV4, SlidingLayersKeepLessByTheCompressor) {
  nlohmann::json json = oracle_case("deepseek_v4_stack_h256_s64").at("config");
  json["layer_types"] = {"sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention",
                         "sliding_attention"};
  const auto config = read_config(json);
  ASSERT_TRUE(config.ok()) << config.refusal().message();
  const std::vector<StackLayerCensus> stack = census_stack(*config, 64);
  EXPECT_EQ(stack[2].kept - stack[0].kept, 8192 + 16384 + 8192 + (512 + 8 + 256) + 128 + 256);
  EXPECT_EQ(stack[2].kept - stack[3].kept, 33928);
}

// The output census of a DeepSeek-V4 model takes its streams (1, S, M, H) through hc_head before the
// final norm. At the toy's shape (S = 64, M = 4, H = 256, V = 4096) the norm, LM head and loss save what
// a Llama's do at the same H, V and S (the oracle's llama_h256_s64 output_vocab), and hc_head adds:
//   x = streams.flatten(2).float()  64 x 1024 fp32     262144   pow, the norm's mul
//   rsqrt(mean(x^2) + eps)          64 x 1 fp32           256   rsqrt, the norm's mul
//   flat = x * r                    64 x 1024 fp32     262144   mm
//   hc_fn.float()                   4 x 1024 fp32       16384   mm
//   mixes                           64 x 4 fp32          1024   the scale's multiply
//   hc_scale.float()                1 fp32                  4   that multiply
//   sigmoid(...)                    64 x 4 fp32          1024   sigmoid
//   pre + eps                       64 x 4 fp32          1024   the collapse's multiply
//   the streams                     64 x 4 x 256 bf16  131072   the collapse's multiply
//   = 675076 bytes
TEST(DeepseekV4, OutputCensusCollapsesTheStreamsFirst) {
  const ModelConfig config = oracle_config(oracle_case("deepseek_v4_stack_h256_s64"));
  const nlohmann::json llama = oracle_case("llama_h256_s64");
  const int64_t hc_head = 262144 + 256 + 262144 + 16384 + 1024 + 4 + 1024 + 1024 + 131072;
  EXPECT_EQ(hc_head, 675076);
  const OutputCensus output = census_output(config, 64, config.vocab_size);
  EXPECT_EQ(output.saved_bytes, llama.at("output_vocab").at("saved_bytes").get<int64_t>() + hc_head);
}

}  // namespace
}  // namespace census
