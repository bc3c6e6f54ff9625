// One truth across whole searches: every layout `census plan` prints is what `census step` prints for its
// step_args, to the byte (the Llama toy, the MoE toy, the DeepSeek-V4 toy, Llama-3.1-70B on
// 64 GPUs); every memory lower bound the search rejects by is at most the simulated peak; every pipeline
// stage the plan leaves unsimulated
// (Note [Stages a 1F1B pipeline need not simulate]) holds no more than the stage standing for it.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_run.h"

namespace census {
namespace {

using testing::CliRun;
using testing::census;
using testing::write_test_file;

std::string toy(bool moe) {
  return moe ? write_test_file("search_toy_moe.json", R"({"model_type": "qwen3_moe", "hidden_size": 256,
    "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 32, "intermediate_size": 512,
    "num_hidden_layers": 4, "vocab_size": 4096, "max_position_embeddings": 8192, "num_experts": 8,
    "num_experts_per_tok": 2, "moe_intermediate_size": 256, "mlp_only_layers": [0]})")
             : write_test_file("search_toy_llama.json", R"({"model_type": "llama", "hidden_size": 256,
    "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 32, "intermediate_size": 512,
    "num_hidden_layers": 4, "vocab_size": 4096, "max_position_embeddings": 8192})");
}

nlohmann::json run_json(std::vector<std::string> args) {
  args.insert(args.end(), {"--format", "json"});
  const CliRun run = census(args);
  EXPECT_EQ(run.code, 0) << run.err;
  return run.code == 0 ? nlohmann::json::parse(run.out) : nlohmann::json::object();
}

// census step on every stage of a layout: {"stages": [...], "total_bytes"} (one stage's object where PP 1).
nlohmann::json every_stage(const std::string& config, const nlohmann::json& layout) {
  std::vector<std::string> args = {"step", config};
  const auto& step_args = layout["step_args"];
  for (size_t i = 0; i < step_args.size(); ++i) {
    if (step_args[i] == "--stage") {
      ++i;  // every stage
      continue;
    }
    args.push_back(step_args[i].get<std::string>());
  }
  return run_json(args);
}

// Each layout printed: census step with its step_args gives its peak; its memory lower bound is at most its
// peak. Where the plan left a stage out (or `every`), every stage census step runs gives the plan's bytes
// for it, or (a stage left out) no more than the stage standing for it.
void expect_one_truth(const std::string& config, const nlohmann::json& plan, bool every = false) {
  ASSERT_FALSE(plan["layouts"].empty());
  for (const auto& l : plan["layouts"]) {
    std::vector<std::string> args = {"step", config};
    for (const auto& a : l["step_args"]) args.push_back(a.get<std::string>());
    const nlohmann::json step = run_json(args);
    EXPECT_EQ(step["total_bytes"], l["peak_bytes"]) << l["step_args"].dump();
    EXPECT_LE(l["memory_lower_bound_bytes"].get<int64_t>(), l["peak_bytes"].get<int64_t>()) << l["step_args"].dump();
    bool left_out = false;
    for (const auto& bytes : l["stage_bytes"]) left_out = left_out || bytes.is_null();
    if (l["pp"] == 1 || (!left_out && !every)) continue;
    const nlohmann::json all = every_stage(config, l);
    EXPECT_EQ(all["total_bytes"], l["peak_bytes"]) << l["step_args"].dump();
    for (size_t s = 0; s < all["stages"].size(); ++s) {
      const int64_t bytes = all["stages"][s]["total_bytes"];
      const auto& planned = l["stage_bytes"][s];
      if (!planned.is_null()) {
        EXPECT_EQ(bytes, planned.get<int64_t>()) << "stage " << s << " of " << l["step_args"].dump();
        continue;
      }
      const int64_t standing = l["standing_stage"][s];
      EXPECT_LE(bytes, all["stages"][standing]["total_bytes"].get<int64_t>()) << "stage " << s << " of " << l["step_args"].dump();
    }
  }
}

// Every layout of the toys with room for all (the Llama toy on 4 devices, 2 a node, 8 sequences a step:
// TP, CP and PP with its splits and schedules, micro-batches of 1 to 8; the MoE toy, two layer kinds, on 2
// devices of a node, 4 sequences: EP, recompute by kind), and a tight memory, where the search rejects by
// its bounds and its simulations.
TEST(PlanSearch, EveryLayoutOfTheToysIsCensusStep) {
  for (bool moe : {false, true}) {
    const std::string config = toy(moe);
    const std::string gpus = moe ? "2" : "4", batch = moe ? "4" : "8";
    const nlohmann::json all = run_json({"plan", config, "--gpus", gpus, "--gpus-per-node", "2", "--seq-length", "128",
                                         "--global-batch", batch, "--gpu-memory", "1TiB", "--top", "100000",
                                         "--master-weights", "fp32", "--cuda-context", "1000"});
    EXPECT_EQ(all["counts"]["fit"].get<int64_t>(), static_cast<int64_t>(all["layouts"].size()));
    EXPECT_EQ(all["counts"]["not_evaluated"], 0);
    expect_one_truth(config, all);
    // Leaving stages out: some layout of the Llama toy has one (1F1B over 4 stages of a layer each, M >= 5).
    bool left_out = false, by_kind = false;
    for (const auto& l : all["layouts"]) {
      for (const auto& bytes : l["stage_bytes"]) left_out = left_out || bytes.is_null();
      by_kind = by_kind || l["recompute"].get<std::string>().find('=') != std::string::npos;
    }
    EXPECT_EQ(left_out, !moe);
    EXPECT_EQ(by_kind, moe);
    int64_t smallest = all["layouts"][0]["peak_bytes"];
    for (const auto& l : all["layouts"]) smallest = std::min<int64_t>(smallest, l["peak_bytes"]);
    const nlohmann::json tight = run_json({"plan", config, "--gpus", gpus, "--gpus-per-node", "2", "--seq-length", "128",
                                           "--global-batch", batch, "--gpu-memory", std::to_string(smallest + smallest / 8),
                                           "--top", "3"});
    expect_one_truth(config, tight, /*every=*/true);
  }
}

// Models with layers that cannot run alone, timed and bounded through the model's forward: the step
// oracle's DeepSeek-V4 toy (every layer) and Gemma 4 toy (its KV-shared layers), every layout on 2 devices, 4 sequences a step; and a tight
// memory, where the search rejects by its bounds.
TEST(PlanSearch, EveryLayoutOfTheStackOnlyToysIsCensusStep) {
  for (const std::string family : {"deepseek_v4", "gemma4"}) {
    std::ifstream file(std::string(CENSUS_TEST_DATA) + "/step/" + family + "_toy_L4_s128_single.json");
    const std::string config = write_test_file("search_toy_" + family + ".json", nlohmann::json::parse(file).at("config").dump());
    const nlohmann::json all = run_json({"plan", config, "--gpus", "2", "--gpus-per-node", "2", "--seq-length", "128",
                                         "--global-batch", "4", "--gpu-memory", "1TiB", "--top", "100000"});
    EXPECT_EQ(all["counts"]["fit"].get<int64_t>(), static_cast<int64_t>(all["layouts"].size())) << family;
    EXPECT_EQ(all["counts"]["not_evaluated"], 0) << family;
    expect_one_truth(config, all);
    int64_t smallest = all["layouts"][0]["peak_bytes"];
    for (const auto& l : all["layouts"]) smallest = std::min<int64_t>(smallest, l["peak_bytes"]);
    const nlohmann::json tight = run_json({"plan", config, "--gpus", "2", "--gpus-per-node", "2", "--seq-length", "128",
                                           "--global-batch", "4", "--gpu-memory", std::to_string(smallest + smallest / 8),
                                           "--top", "3"});
    expect_one_truth(config, tight, /*every=*/true);
  }
}

// Llama 4's experts run every token through every expert (one batched matmul), which expert
// parallelism does not shard: census step refuses --ep for them, so the search keeps EP at 1 and its
// header says why.
TEST(PlanSearch, LlamaFourKeepsItsExpertsWhole) {
  std::ifstream file(std::string(CENSUS_TEST_DATA) + "/step/llama4_toy_L4_s128_single.json");
  const std::string config = write_test_file("search_toy_llama4.json", nlohmann::json::parse(file).at("config").dump());
  const CliRun text = census({"plan", config, "--gpus", "4", "--seq-length", "128", "--gpu-memory", "1TiB"});
  EXPECT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("EP 1 (its experts run every token through every expert"), std::string::npos) << text.out;
  const nlohmann::json all = run_json({"plan", config, "--gpus", "4", "--seq-length", "128", "--gpu-memory", "1TiB",
                                       "--top", "100000"});
  ASSERT_FALSE(all["layouts"].empty());
  for (const auto& l : all["layouts"]) EXPECT_EQ(l["ep"], 1) << l["step_args"].dump();
}

// Llama-3.1-70B on 64 H100s at 8k tokens: the layouts the search prints.
TEST(PlanSearch, Llama70BOn64GpusIsCensusStep) {
  const nlohmann::json plan = run_json({"plan", "llama-3.1-70b", "--gpus", "64", "--seq-length", "8192", "--top", "5"});
  EXPECT_EQ(plan["layouts"].size(), 5u);
  expect_one_truth("llama-3.1-70b", plan, /*every=*/true);
}

}  // namespace
}  // namespace census
