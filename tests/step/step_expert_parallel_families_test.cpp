// Expert parallelism on every family with experts, as Transformers' expert-parallel plan shards them:
// "grouped_gemm" on the experts' weights (dim 0, the experts), "ep_router" leaving the router whole.
// On every step case's MoE toy (tests/data/step, 4 layers, 8 experts; Gemma 4's with its MoE block
// turned on), built whole and as a rank of EP 2:
// the two parameter lists name the same tensors in the same order; each routed expert tensor of the
// rank holds 4 of the 8 experts along dim 0, its other dims unchanged; every other parameter (the
// router, shared experts, attention, norms, dense layers) is the same size. census step's parameter
// count at EP 2 is then the whole model's less half the routed experts' parameters. Llama 4's experts,
// which run every token through every expert in one batched matmul, are refused.
#include <gtest/gtest.h>

#include <map>

#include "census/parts.h"
#include "models/causal_lm.h"
#include "models/registry.h"
#include "ops/dispatch.h"
#include "step/step_census.h"
#include "step_cases.h"

namespace census {
namespace {

constexpr int64_t kExpertParallel = 2;

// Each step-case family's toy with experts, by family.
std::map<std::string, ModelConfig> moe_toys() {
  std::map<std::string, ModelConfig> out;
  for (const std::string& name : testing::step_case_names()) {
    const size_t toy = name.find("_toy_");
    if (toy == std::string::npos || out.count(name.substr(0, toy))) continue;
    auto config = read_config(testing::step_case(name).at("config"));
    if (!config) throw std::runtime_error(config.refusal().message());
    if (config->moe.num_experts > 0) out.emplace(name.substr(0, toy), config.take());
  }
  // Gemma 4's toy is dense; its MoE block beside the MLP (Gemma-4-26B-A4B's), 8 experts of width 256.
  nlohmann::json gemma4 = testing::step_case("gemma4_toy_L4_s128_single").at("config");
  gemma4["enable_moe_block"] = true;
  gemma4["num_experts"] = 8;
  gemma4["top_k_experts"] = 2;
  gemma4["moe_intermediate_size"] = 256;
  auto config = read_config(gemma4);
  if (!config) throw std::runtime_error(config.refusal().message());
  out.emplace("gemma4_moe", config.take());
  return out;
}

struct Parameter {
  std::string name;
  Dims sizes;
};

std::vector<Parameter> parameters_of(const ModelConfig& config, int64_t ep) {
  Session session;
  const ModelConfig rank = rank_config(config, /*tensor_parallel=*/1, ep, /*expert_tensor_parallel=*/0);
  const std::unique_ptr<CausalLM> model = build_causal_lm(config, rank, whole_model(config));
  std::vector<Parameter> out;
  for (const Tensor& parameter : model->parameters()) out.push_back({parameter.name(), parameter.sizes()});
  return out;
}

TEST(StepExpertParallel, EveryFamilyShardsItsRoutedExperts) {
  int64_t families = 0;
  for (const auto& [family, config] : moe_toys()) {
    StepOptions o;
    o.seq_length = 128;
    o.expert_parallel = kExpertParallel;
    if (!config.moe.shards_under_expert_parallel) {
      const auto refused = census_step(config, o);
      ASSERT_FALSE(refused) << family;
      EXPECT_NE(refused.refusal().message().find("--ep 2"), std::string::npos) << family;
      continue;
    }
    ASSERT_EQ(config.moe.num_experts, 8) << family;
    const std::vector<Parameter> whole = parameters_of(config, 1), rank = parameters_of(config, kExpertParallel);
    ASSERT_EQ(whole.size(), rank.size()) << family;
    int64_t routed = 0, routed_tensors = 0;
    for (size_t i = 0; i < whole.size(); ++i) {
      const std::string what = family + " " + whole[i].name;
      ASSERT_EQ(whole[i].name, rank[i].name) << what;
      if (parameter_part(whole[i].name) != "routed") {
        EXPECT_EQ(whole[i].sizes, rank[i].sizes) << what;
        continue;
      }
      ASSERT_GE(whole[i].sizes.size(), 2) << what;
      EXPECT_EQ(whole[i].sizes[0], 8) << what;
      Dims halved = whole[i].sizes;
      halved[0] = 4;
      EXPECT_EQ(rank[i].sizes, halved) << what;
      routed += whole[i].sizes.product();
      ++routed_tensors;
    }
    EXPECT_GT(routed_tensors, 0) << family;
    const auto sharded = census_step(config, o);
    ASSERT_TRUE(sharded) << family << ": " << sharded.refusal().message();
    o.expert_parallel = 1;
    const auto all = census_step(config, o);
    ASSERT_TRUE(all) << family;
    EXPECT_EQ(sharded->parameter_count, all->parameter_count - routed / kExpertParallel) << family;
    ++families;
  }
  EXPECT_GE(families, 15);  // every step-case family with experts but Llama 4's, and Gemma 4's MoE
}

}  // namespace
}  // namespace census
