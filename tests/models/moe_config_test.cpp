// Reading the MoE families' configs: defaults, which layers are sparse, attribute_map aliases, and
// refusals of what no router can run (one line each, naming the field).
#include <gtest/gtest.h>

#include "models/registry.h"

namespace census {
namespace {

ModelConfig read(const char* text) {
  auto config = read_config(nlohmann::json::parse(text));
  if (!config) throw std::runtime_error(config.refusal().message());
  return config.take();
}

std::string refusal(const char* text) {
  auto config = read_config(nlohmann::json::parse(text));
  return config ? std::string() : config.refusal().message();
}

TEST(MoeConfig, Qwen3MoeDefaults) {
  const ModelConfig c = read(R"({"model_type": "qwen3_moe"})");
  EXPECT_EQ(c.moe.num_experts, 128);
  EXPECT_EQ(c.moe.num_experts_per_tok, 8);
  EXPECT_EQ(c.moe.moe_intermediate_size, 768);
  EXPECT_FALSE(c.moe.norm_topk_prob);
  EXPECT_EQ(c.head_dim, 2048 / 32);  // head_dim is no Qwen3MoeConfig field: hidden / heads unless stated
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.moe.experts_implementation, nn::ExpertsImplementation::kGroupedMm);
}

TEST(MoeConfig, AttributeMapAliasesNameTheExperts) {
  EXPECT_EQ(read(R"({"model_type": "qwen3_moe", "num_local_experts": 16, "num_experts_per_tok": 2})").moe.num_experts, 16);
  EXPECT_EQ(read(R"({"model_type": "mixtral", "num_experts": 4})").moe.num_experts, 4);
  EXPECT_EQ(read(R"({"model_type": "deepseek_v3", "num_local_experts": 64, "n_group": 8, "topk_group": 4})").moe.num_experts, 64);
}

TEST(MoeConfig, QwenSparseLayersBySparseStepAndMlpOnlyLayers) {
  const ModelConfig c = read(R"({"model_type": "qwen2_moe", "num_hidden_layers": 6, "decoder_sparse_step": 2,
                                 "mlp_only_layers": [3]})");
  // MoE iff not listed and (index + 1) % step == 0: layers 1 and 5; 3 is listed.
  std::vector<bool> moe;
  for (int64_t i = 0; i < 6; ++i) moe.push_back(is_moe_layer(c, i));
  EXPECT_EQ(moe, (std::vector<bool>{false, true, false, false, false, true}));
  const std::vector<LayerGroup> stack = layer_stack(c);
  ASSERT_EQ(stack.size(), 4u);
  EXPECT_EQ(stack[0].kind, "dense");
  EXPECT_EQ(stack[1].kind, "moe");
  EXPECT_EQ(stack[2].kind, "dense");
  EXPECT_EQ(stack[2].count, 3);
}

TEST(MoeConfig, DeepSeekDenseFirstThenMoeThenMtp) {
  const ModelConfig c = read(R"({"model_type": "deepseek_v3", "num_hidden_layers": 5, "first_k_dense_replace": 2})");
  EXPECT_EQ(c.mla.q_lora_rank, 1536);
  EXPECT_EQ(c.head_dim, 64);  // qk_rope_head_dim
  const std::vector<LayerGroup> stack = layer_stack(c);
  ASSERT_EQ(stack.size(), 3u);
  EXPECT_EQ(stack[0].kind, "dense");
  EXPECT_EQ(stack[0].count, 2);
  EXPECT_EQ(stack[1].kind, "moe");
  EXPECT_EQ(stack[1].count, 3);
  EXPECT_TRUE(stack[2].mtp);
  // A stated null q_lora_rank is a plain q_proj.
  EXPECT_EQ(read(R"({"model_type": "deepseek_v3", "q_lora_rank": null})").mla.q_lora_rank, 0);
}

TEST(MoeConfig, GptOssAlternatesSlidingAndFullLayers) {
  const ModelConfig c = read(R"({"model_type": "gpt_oss", "num_hidden_layers": 4})");
  const std::vector<LayerGroup> stack = layer_stack(c);
  ASSERT_EQ(stack.size(), 4u);
  EXPECT_EQ(stack[0].kind, "sliding_attention");
  EXPECT_EQ(stack[1].kind, "full_attention");
  EXPECT_TRUE(c.qkv_bias && c.o_bias);
}

TEST(MoeConfig, ExpertsImplementationFromTheConfig) {
  EXPECT_EQ(read(R"({"model_type": "mixtral", "_experts_implementation": "eager"})").moe.experts_implementation,
            nn::ExpertsImplementation::kEager);
  EXPECT_NE(refusal(R"({"model_type": "mixtral", "_experts_implementation": "sonicmoe"})").find("_experts_implementation"),
            std::string::npos);
}

TEST(MoeConfigRefuses, TopKBeyondTheExperts) {
  const std::string message = refusal(R"({"model_type": "qwen3_moe", "num_experts": 4, "num_experts_per_tok": 8})");
  EXPECT_NE(message.find("num_experts_per_tok"), std::string::npos) << message;
  EXPECT_NE(message.find("exceeds the 4 experts"), std::string::npos) << message;
}

TEST(MoeConfigRefuses, ZeroExperts) {
  EXPECT_NE(refusal(R"({"model_type": "mixtral", "num_local_experts": 0})").find("at least one expert"), std::string::npos);
  EXPECT_NE(refusal(R"({"model_type": "deepseek_v3", "n_routed_experts": 0})").find("n_routed_experts"), std::string::npos);
}

TEST(MoeConfigRefuses, GroupsThatDoNotDivideTheExperts) {
  const std::string message = refusal(R"({"model_type": "deepseek_v3", "n_routed_experts": 250, "n_group": 8})");
  EXPECT_NE(message.find("n_group"), std::string::npos) << message;
  EXPECT_NE(message.find("do not divide"), std::string::npos) << message;
  EXPECT_NE(refusal(R"({"model_type": "deepseek_v3", "n_group": 8, "topk_group": 9})").find("topk_group"), std::string::npos);
  EXPECT_NE(refusal(R"({"model_type": "deepseek_v3", "n_routed_experts": 8, "n_group": 8, "topk_group": 1})").find("n_group"),
            std::string::npos);
}

TEST(MoeConfigRefuses, BadSparseLayerLists) {
  EXPECT_NE(refusal(R"({"model_type": "qwen3_moe", "num_hidden_layers": 4, "mlp_only_layers": [7]})").find("mlp_only_layers"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"model_type": "qwen3_moe", "mlp_only_layers": "all"})").find("mlp_only_layers"), std::string::npos);
  EXPECT_NE(refusal(R"({"model_type": "mixtral", "router_jitter_noise": 0.1})").find("router_jitter_noise"), std::string::npos);
}

}  // namespace
}  // namespace census
