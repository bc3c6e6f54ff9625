// Reading the config.json of the families with attention layers of their own: their config classes'
// defaults, the layer kinds they derive, and refusals of what cannot be priced.
#include <gtest/gtest.h>

#include "models/registry.h"

namespace census {
namespace {

ModelConfig read(const char* text) {
  auto config = read_config(nlohmann::json::parse(text));
  if (!config) throw std::runtime_error(config.refusal().message());
  return config.take();
}

Refusal refusal_of(const char* text) {
  auto config = read_config(nlohmann::json::parse(text));
  if (config.ok()) return Refusal{"", "accepted"};
  return config.refusal();
}

TEST(AttentionFamiliesConfig, SeedOssBiasesQkvNotOAndDropsOut) {
  const ModelConfig c = read(R"({"model_type": "seed_oss"})");
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_FALSE(c.o_bias);
  EXPECT_EQ(c.residual_dropout, 0.1);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(refusal_of(R"({"model_type": "seed_oss", "residual_dropout": 1.0})").field, "residual_dropout");
}

TEST(AttentionFamiliesConfig, Phi3RotaryWidthFromRopeParametersOrTopLevel) {
  EXPECT_EQ(read(R"({"model_type": "phi3", "partial_rotary_factor": 0.75, "hidden_size": 3072,
                     "num_attention_heads": 24})").rotary_dim, 96);
  EXPECT_EQ(read(R"({"model_type": "phi3", "rope_parameters": {"partial_rotary_factor": 0.5}})").rotary_dim, 48);
  EXPECT_EQ(read(R"({"model_type": "phi3"})").rotary_dim, 96);  // 3072 / 32, all of it
}

TEST(AttentionFamiliesConfig, SmolLM3KindsFromNoRopeLayers) {
  const ModelConfig c = read(R"({"model_type": "smollm3", "num_hidden_layers": 8})");
  EXPECT_EQ(layer_kind(c, 2), "rope");
  EXPECT_EQ(layer_kind(c, 3), "nope");
  EXPECT_EQ(layer_kind(c, 7), "nope");
  const ModelConfig stated = read(R"({"model_type": "smollm3", "num_hidden_layers": 2, "no_rope_layers": [0, 1]})");
  EXPECT_EQ(layer_kind(stated, 0), "nope");
  EXPECT_EQ(refusal_of(R"({"model_type": "smollm3", "num_hidden_layers": 2, "no_rope_layers": [1]})").field,
            "no_rope_layers");
}

TEST(AttentionFamiliesConfig, Olmo3EveryFourthLayerFull) {
  const ModelConfig c = read(R"({"model_type": "olmo3", "num_hidden_layers": 8})");
  EXPECT_EQ(layer_kind(c, 0), "sliding_attention");
  EXPECT_EQ(layer_kind(c, 3), "full_attention");
  EXPECT_EQ(c.rms_norm_eps, 1e-5);
}

TEST(AttentionFamiliesConfig, MiMoV2FlashLayersAndRotary) {
  const ModelConfig c = read(R"({"model_type": "mimo_v2_flash"})");
  EXPECT_EQ(c.v_head_dim, 128);
  EXPECT_EQ(c.rotary_dim, 64);  // int(192 * 0.334)
  EXPECT_EQ(layer_kind(c, 0), "full_attention_dense");
  EXPECT_EQ(layer_kind(c, 1), "sliding_attention_moe");
  EXPECT_EQ(layer_kind(c, 5), "full_attention_moe");
  const Refusal differing = refusal_of(R"({"model_type": "mimo_v2_flash", "rope_parameters": {
      "full_attention": {"partial_rotary_factor": 0.5}, "sliding_attention": {"partial_rotary_factor": 0.25}}})");
  EXPECT_EQ(differing.field, "rope_parameters");
}

TEST(AttentionFamiliesConfig, Llama4KindsAndMoeLayers) {
  const ModelConfig c = read(R"({"model_type": "llama4", "text_config": {"model_type": "llama4_text",
                                 "num_hidden_layers": 8, "interleave_moe_layer_step": 2}})");
  EXPECT_EQ(layer_kind(c, 0), "chunked_attention_dense");
  EXPECT_EQ(layer_kind(c, 1), "chunked_attention_moe");
  EXPECT_EQ(layer_kind(c, 3), "full_attention_moe");
  EXPECT_EQ(c.intermediate_size, 16384);           // intermediate_size_mlp: the dense layers'
  EXPECT_EQ(c.moe.moe_intermediate_size, 8192);    // intermediate_size: an expert's
  EXPECT_EQ(c.moe.shared_expert_intermediate_size, 8192);
  const Refusal mismatch = refusal_of(R"({"model_type": "llama4_text", "num_hidden_layers": 2,
                                          "no_rope_layers": [1, 1], "layer_types": ["chunked_attention", "full_attention"]})");
  EXPECT_EQ(mismatch.field, "layer_types");
}

}  // namespace
}  // namespace census
