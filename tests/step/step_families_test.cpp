// census step on families beyond the step oracle's, whose causal LM is Llama's model forward around
// their own layers (Transformers 5's SeedOssModel and HunYuanMoEV1Model: the embedding, the rotary once,
// the layers, the final norm; their ForCausalLM the head and ForCausalLMLoss), each layer exact against
// the layer oracle (tests/data/oracle/*_h256_s128.json). The step's model-level parts are the Llama
// toy's, whose step the step oracle fixes, so at the same hidden size, vocabulary and tokens (256, 4096,
// 128; 4 layers, one micro-batch) a family's step differs from the Llama toy's by its layers alone:
//
//   parameters  2 x 4096 x 256 (embedding, head) + 256 (final norm) + 4 x the layer's
//               (the layer oracle's totals: Llama 557,568, Seed-OSS 557,952, HunYuan-MoE 1,935,936)
//   F0's graph  what the forward leaves live for the backward: the Llama toy's 7,756,304
//               (tests/data/step/llama_toy_L4_s128_single: F0 ends at 16,411,792 from 8,655,488)
//               + 4 x (the layer's saved bytes - Llama's 1,360,896), as the layer oracle counts them:
//               Seed-OSS 1,491,968 (with its dropouts' masks), HunYuan-MoE 2,282,272 (with its router,
//               experts and shared MLP)
//
// Gemma 2's final-logit softcapping, logits = tanh(logits / cap) * cap, is the one model-level op a
// softcapped head adds: the division and the multiplication by a number save nothing, tanh saves its
// output for its backward, (1, 128, 4096) bf16 = 1,048,576 bytes. So the Gemma 2 toy's forward graph
// (tests/data/step/gemma2_toy_L4_s128_single, exact against the step oracle) is the same config's
// without the cap plus exactly that.
#include <gtest/gtest.h>

#include <fstream>

#include "step/step_census.h"
#include "models/registry.h"

namespace census {
namespace {

StepCensus run(const nlohmann::json& json) {
  auto config = read_config(json);
  if (!config) throw std::runtime_error(config.refusal().message());
  StepOptions o;
  o.seq_length = 128;
  auto step = census_step(*config, o);
  if (!step) throw std::runtime_error(step.refusal().message());
  return step.take();
}

int64_t forward_graph(const StepCensus& s) {
  const StepPhase& f0 = s.analysis.phases[1];
  EXPECT_EQ(f0.name, "F0");
  return f0.live_at_end - f0.live_at_start;
}

constexpr int64_t kModelParameters = 2 * 4096 * 256 + 256;
constexpr int64_t kLlamaGraph = 7'756'304, kLlamaLayerSaved = 1'360'896;

TEST(StepFamilies, SeedOssIsTheLlamaStepWithItsLayers) {
  const StepCensus s = run({{"model_type", "seed_oss"},      {"hidden_size", 256},         {"num_attention_heads", 8},
                            {"num_key_value_heads", 2},      {"head_dim", 32},             {"intermediate_size", 512},
                            {"num_hidden_layers", 4},        {"vocab_size", 4096},         {"max_position_embeddings", 8192},
                            {"attention_bias", true},        {"attention_out_bias", false}, {"attention_dropout", 0.1},
                            {"residual_dropout", 0.1},       {"rms_norm_eps", 1e-6}});
  EXPECT_EQ(s.parameter_count, kModelParameters + 4 * 557'952);
  EXPECT_EQ(forward_graph(s), kLlamaGraph + 4 * (1'491'968 - kLlamaLayerSaved));
}

TEST(StepFamilies, HunYuanMoeIsTheLlamaStepWithItsLayers) {
  const StepCensus s = run({{"model_type", "hunyuan_v1_moe"}, {"hidden_size", 256},  {"num_attention_heads", 8},
                            {"num_key_value_heads", 2},       {"head_dim", 32},      {"intermediate_size", 256},
                            {"num_hidden_layers", 4},         {"vocab_size", 4096},  {"max_position_embeddings", 8192},
                            {"num_experts", 8},               {"moe_topk", 2},       {"rms_norm_eps", 1e-5}});
  EXPECT_EQ(s.parameter_count, kModelParameters + 4 * 1'935'936);
  EXPECT_EQ(forward_graph(s), kLlamaGraph + 4 * (2'282'272 - kLlamaLayerSaved));
}

TEST(StepFamilies, GemmaSoftcappingSavesTanhsOutput) {
  nlohmann::json config =
      nlohmann::json::parse(std::ifstream(std::string(CENSUS_TEST_DATA) + "/step/gemma2_toy_L4_s128_single.json"))
          .at("config");
  ASSERT_EQ(config.at("final_logit_softcapping"), 30.0);
  const int64_t capped = forward_graph(run(config));
  config["final_logit_softcapping"] = nullptr;
  EXPECT_EQ(capped, forward_graph(run(config)) + 1 * 128 * 4096 * 2);
  EXPECT_EQ(capped, 18'075'794 - 6'562'434);  // the step oracle's F0: live at its end less at its start
}

}  // namespace
}  // namespace census
