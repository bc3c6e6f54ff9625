// Reading config.json: each family's defaults for absent fields, and refusals of what cannot be priced.
#include <gtest/gtest.h>

#include "models/registry.h"

namespace census {
namespace {

ModelConfig read(const char* text) {
  auto config = read_config(nlohmann::json::parse(text));
  if (!config) throw std::runtime_error(config.refusal().message());
  return config.take();
}

TEST(Config, LlamaDefaultsKvHeadsAndHeadDimFromHeads) {
  const ModelConfig c = read(R"({"model_type": "llama"})");
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.intermediate_size, 11008);
  EXPECT_EQ(c.num_key_value_heads, 32);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.vocab_size, 32000);
  EXPECT_FALSE(c.qkv_bias);
}

TEST(Config, Qwen3HeadDimIsItsOwnDefault) {
  const ModelConfig c = read(R"({"model_type": "qwen3", "hidden_size": 1024, "num_attention_heads": 16,
                                 "num_key_value_heads": 8})");
  EXPECT_EQ(c.head_dim, 128);  // not 1024 / 16
  EXPECT_TRUE(c.qk_norm);
}

TEST(Config, Qwen2BiasesQkvOnly) {
  const ModelConfig c = read(R"({"model_type": "qwen2"})");
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_FALSE(c.o_bias);
  EXPECT_EQ(c.num_key_value_heads, 32);
}

TEST(Config, NullMeansDefault) {
  const ModelConfig c = read(R"({"model_type": "mistral", "head_dim": null, "num_key_value_heads": null})");
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.num_key_value_heads, 8);  // MistralConfig's own default
}

TEST(Config, TextConfigOfACompositeConfig) {
  const ModelConfig c = read(R"({"model_type": "composite", "text_config": {"model_type": "llama", "hidden_size": 512,
                                 "num_attention_heads": 8}})");
  EXPECT_EQ(c.hidden_size, 512);
}

TEST(Config, QwenSlidingLayersAreAKindOfTheirOwn) {
  const ModelConfig c = read(R"({"model_type": "qwen2", "num_hidden_layers": 4, "use_sliding_window": true,
                                 "sliding_window": 4096, "max_window_layers": 2})");
  const std::vector<LayerGroup> stack = layer_stack(c);
  ASSERT_EQ(stack.size(), 2u);
  EXPECT_EQ(stack[0].kind, "full_attention");
  EXPECT_EQ(stack[1].kind, "sliding_attention");
  EXPECT_EQ(stack[1].count, 2);
}

TEST(Config, RefusesLayerTypesOfTheWrongLength) {
  auto c = read_config(nlohmann::json::parse(R"({"model_type": "qwen3", "num_hidden_layers": 3,
                                                 "layer_types": ["full_attention"]})"));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.refusal().field, "layer_types");
}

}  // namespace
}  // namespace census

namespace census {
namespace {

TEST(GemmaConfig, DefaultLayerPatterns) {
  const ModelConfig gemma3 = read(R"({"model_type": "gemma3_text", "num_hidden_layers": 12})");
  const std::vector<LayerGroup> stack = layer_stack(gemma3);
  ASSERT_EQ(stack.size(), 4u);  // five sliding layers, one full, twice
  EXPECT_EQ(stack[0].kind, "sliding_attention");
  EXPECT_EQ(stack[0].count, 5);
  EXPECT_EQ(stack[1].kind, "full_attention");
  EXPECT_EQ(stack[1].count, 1);
  EXPECT_TRUE(gemma3.qk_norm);
  EXPECT_EQ(gemma3.head_dim, 256);
  const ModelConfig gemma2 = read(R"({"model_type": "gemma2", "num_hidden_layers": 4})");
  EXPECT_EQ(layer_stack(gemma2).size(), 4u);  // sliding and full alternate
  EXPECT_EQ(gemma2.hidden_act, nn::HiddenAct::kGeluTanh);
}

TEST(GemmaConfig, CompositeConfigsReadTheirTextConfig) {
  const ModelConfig gemma3 = read(R"({"model_type": "gemma3", "text_config": {"model_type": "gemma3_text",
                                      "hidden_size": 5376, "num_attention_heads": 32, "num_key_value_heads": 16,
                                      "head_dim": 128}})");
  EXPECT_EQ(gemma3.model_type, "gemma3_text");
  EXPECT_EQ(gemma3.vocab_size, 262208);
  const ModelConfig vl = read(R"({"model_type": "qwen3_vl", "text_config": {"model_type": "qwen3_vl_text",
                                  "num_attention_heads": 32, "num_key_value_heads": 8}})");
  EXPECT_EQ(vl.head_dim, 128);
  EXPECT_TRUE(vl.qk_norm);
}

TEST(GemmaConfig, RefusesLayerTypesThatDoNotFit) {
  auto wrong_length = read_config(nlohmann::json::parse(R"({"model_type": "gemma2", "num_hidden_layers": 3,
                                                            "layer_types": ["full_attention"]})"));
  ASSERT_FALSE(wrong_length.ok());
  EXPECT_EQ(wrong_length.refusal().field, "layer_types");
  auto unknown = read_config(nlohmann::json::parse(R"({"model_type": "gemma3_text", "num_hidden_layers": 1,
                                                       "layer_types": ["chunked_attention"]})"));
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.refusal().advice.find("known kinds"), std::string::npos);
}

}  // namespace
}  // namespace census
