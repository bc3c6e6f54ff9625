// `census plan --from TRAINER FILE`: the run a trainer's file states, planned: the plan is the one of the flags
// the file's "from" line prints (its model, sequence length, sequences a step, optimizer, loss, kernels,
// precision, FSDP2's units and fine-tuning), every layout what census step answers for its step_args, and
// flags beside the file and what the plan cannot lay out are refused by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "cli_run.h"

namespace census {
namespace {

using testing::CliRun;
using testing::census;

const std::string kTrainers = std::string(CENSUS_TEST_DATA) + "/trainers/";

nlohmann::json json_of(std::vector<std::string> args) {
  args.insert(args.end(), {"--format", "json"});
  const CliRun run = census(args);
  EXPECT_EQ(run.code, 0) << run.err;
  return run.code == 0 ? nlohmann::json::parse(run.out) : nlohmann::json();
}

void expect_layouts_are_steps(const nlohmann::json& planned) {
  ASSERT_FALSE(planned["layouts"].empty());
  for (const auto& l : planned["layouts"]) {
    std::vector<std::string> args = {"step", planned["model"]};
    for (const auto& a : l["step_args"]) args.push_back(a);
    EXPECT_EQ(json_of(args)["total_bytes"], l["peak_bytes"]) << l["step_args"].dump();
  }
}

// TRL's LoRA config (census-qwen3-8b-lora.yaml) on one 80 GiB device: 2 sequences x 8 micro-batches are 16 a
// step; TRL's fused AdamW, chunked loss, CUDA kernels, the Trainer's autocast on the fp32 load and the adapters.
TEST(PlanFromCli, TrlsSftConfigPlansAsItsFlags) {
  const std::vector<std::string> devices = {"--gpus", "1", "--gpu-memory", "80GiB", "--top", "100"};
  std::vector<std::string> args = {"plan", "--from", "trl", kTrainers + "trl/census-qwen3-8b-lora.yaml"};
  args.insert(args.end(), devices.begin(), devices.end());
  nlohmann::json planned = json_of(args);
  const nlohmann::json read = planned["from"];
  planned.erase("from");
  const std::vector<std::string> flags = {
      "qwen3-8b", "--gpus", "1", "--seq-length", "2048", "--global-batch", "16", "--optimizer-impl", "fused", "--loss",
      "trl-chunked-nll", "--kernels", "cuda", "--autocast", "bf16", "--lora", "--lora-rank", "32", "--lora-alpha", "16",
      "--lora-dropout", "0.05", "--lora-targets", "all-linear"};
  EXPECT_EQ(read["flags"].get<std::vector<std::string>>(), flags);
  EXPECT_EQ(read["notes"].size(), 3u);
  std::vector<std::string> equivalent = {"plan"};
  equivalent.insert(equivalent.end(), flags.begin(), flags.end());
  equivalent.insert(equivalent.end(), {"--gpu-memory", "80GiB", "--top", "100"});
  EXPECT_EQ(planned, json_of(equivalent));
  EXPECT_EQ(planned["counts"]["tried"], 10);  // b 1, 2, 4, 8, 16 under no and full checkpointing
  expect_layouts_are_steps(planned);
}

// torchtitan v0.2's llama3_8b.toml on 8 GPUs: its FSDP2 units (the embedding, each layer, the norm with the head)
// are the FSDP2 layouts' too, and its CUDA kernels every layout's.
TEST(PlanFromCli, TorchtitansJobKeepsItsFsdpUnitsAndKernels) {
  const nlohmann::json planned = json_of({"plan", "--from", "torchtitan", kTrainers + "torchtitan/v0.2.0-llama3_8b.toml",
                                          "--gpus", "8", "--layout", "dp=8,fsdp=1"});
  const std::vector<std::string> step_args = planned["layouts"][0]["step_args"];
  for (const std::string flag : {"--fsdp-wrap", "--kernels"})
    EXPECT_NE(std::find(step_args.begin(), step_args.end(), flag), step_args.end()) << flag;
  EXPECT_EQ(planned["from"]["flags"][6], "8");  // --global-batch: local_batch_size 1 x DP 8 (its shard degree -1)
  expect_layouts_are_steps(planned);
}

void expect_refused(const std::vector<std::string>& args, const std::string& named) {
  testing::expect_refused_line(args, named);
}

TEST(PlanFromCli, WhatTheFileStatesOrThePlanCannotLayOutIsRefused) {
  const std::string trl = kTrainers + "trl/census-qwen3-8b-lora.yaml";
  expect_refused({"plan", "--from", "trl", trl, "--gpus", "1", "--lora-rank", "4"}, "--lora-rank beside --from: ");
  expect_refused({"plan", "--from", "trl", trl, "--gpus", "1", "--global-batch", "4"}, "--global-batch beside --from: ");
  expect_refused({"plan", "--from", "trl", trl, "--gpus", "2"}, "--gpus 2 with --from trl: ");
  expect_refused({"plan", "--from", "torchtune", kTrainers + "torchtune/v0.6.1-llama3_1-8B_full_single_device.yaml",
                  "--gpus", "1", "--seq-length", "2048"},
                 "--optimizer-in-backward from ");
  expect_refused({"plan", "--gpus", "1"}, "census plan: give a config.json");
}

}  // namespace
}  // namespace census
