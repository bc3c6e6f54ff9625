// `census step --allocator`: reserved beside allocated in the table and in JSON's "allocator", the
// out-of-memory verdict at --gpu-memory, and bad --alloc-conf text refused in one line, exit code 2.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_run.h"

namespace census {
namespace {

using testing::CliRun;
using testing::census;

std::string toy_llama() {
  return testing::write_test_file("allocator_toy_llama.json", R"({"model_type": "llama", "hidden_size": 256,
    "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 32, "intermediate_size": 512,
    "num_hidden_layers": 4, "vocab_size": 4096, "max_position_embeddings": 8192})");
}

// The oracle's first step, its for-loop AdamW.
std::vector<std::string> accumulated(std::vector<std::string> more) {
  std::vector<std::string> args = {"step", toy_llama(), "--seq-length", "128", "--micro-batches", "4", "--allocator",
                                   "--first-step", "--optimizer-impl", "for-loop"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// The oracle's accum_m4_adamw case: its peak, 38,816,540 B, falls in AdamW's update of the LM head
// with the 39 step counts (4 B each) alive; on the device they are not, so the bytes asked for peak
// at 38,816,540 - 156 = 38,816,384 B (tests/step/step_alloc_test.cpp derives it for every case).
TEST(StepAllocatorCli, JsonAddsTheAllocator) {
  const CliRun run = census(accumulated({"--format", "json"}));
  ASSERT_EQ(run.code, 0) << run.err;
  const nlohmann::json j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["peak"]["bytes"], 38'816'540);  // the step's own figures unchanged
  EXPECT_EQ(j["total_bytes"], 38'816'540);
  const nlohmann::json& a = j["allocator"];
  for (const char* key : {"reserved_peak", "allocated_peak", "largest_inactive_split", "num_alloc_retries", "out_of_memory"})
    EXPECT_TRUE(a.contains(key)) << key;
  EXPECT_EQ(a["requested_peak"], 38'816'384);
  EXPECT_GE(a["allocated_peak"].get<int64_t>(), 38'816'384);
  EXPECT_GE(a["reserved_peak"].get<int64_t>(), a["allocated_peak"].get<int64_t>());
  EXPECT_EQ(a["reserved_peak"].get<int64_t>() % (2 << 20), 0);  // whole 2 MiB and 20 MiB segments
  EXPECT_EQ(a["num_alloc_retries"], 0);
  EXPECT_TRUE(a["out_of_memory"].is_null());  // no --gpu-memory: not checked
  EXPECT_EQ(a["host_tensors"]["storages"], 39);
  EXPECT_EQ(a["host_tensors"]["bytes"], 156);
  EXPECT_EQ(a["phases"].size(), 12u);
  EXPECT_EQ(a["total_reserved"], a["reserved_peak"]);
}

TEST(StepAllocatorCli, TablePrintsReservedBesideAllocated) {
  const CliRun run = census(accumulated({"--alloc-conf", "expandable_segments:True", "--cuda-context", "1000"}));
  ASSERT_EQ(run.code, 0) << run.err;
  for (const char* line : {"caching allocator (PyTorch's, simulated", "PYTORCH_CUDA_ALLOC_CONF \"expandable_segments:True\"",
                           "reserved peak", "allocated peak", "requested peak", "38,816,384", "largest inactive split",
                           "num_alloc_retries", "out_of_memory", "not checked: give --gpu-memory", "+ cuda_context",
                           "total reserved", "39 AdamW step counts and scalars, on the CPU"})
    EXPECT_NE(run.out.find(line), std::string::npos) << line;
}

TEST(StepAllocatorCli, OutOfMemoryAtGpuMemory) {
  const CliRun roomy = census(accumulated({"--gpu-memory", "1GiB", "--format", "json"}));
  ASSERT_EQ(roomy.code, 0) << roomy.err;
  const nlohmann::json fits = nlohmann::json::parse(roomy.out)["allocator"];
  EXPECT_EQ(fits["out_of_memory"], false);
  EXPECT_EQ(fits["device_limit"], int64_t{1} << 30);
  EXPECT_TRUE(fits["out_of_memory_at"].is_null());
  // 30 MiB less a 4 MiB CUDA context: 26 MiB for the allocator, under the 38.8 MB the step asks for
  const CliRun tight = census(accumulated({"--gpu-memory", "30MiB", "--cuda-context", "4194304", "--format", "json"}));
  ASSERT_EQ(tight.code, 0) << tight.err;  // a verdict, not a refusal
  const nlohmann::json fails = nlohmann::json::parse(tight.out)["allocator"];
  EXPECT_EQ(fails["out_of_memory"], true);
  EXPECT_EQ(fails["device_limit"], 26 << 20);
  EXPECT_GE(fails["num_alloc_retries"].get<int64_t>(), 1);
  EXPECT_LE(fails["reserved_peak"].get<int64_t>(), 26 << 20);
  EXPECT_TRUE(fails["out_of_memory_at"].contains("phase"));
  const CliRun table = census(accumulated({"--gpu-memory", "30MiB", "--cuda-context", "4194304"}));
  const size_t line = table.out.find("\nout_of_memory ");
  ASSERT_NE(line, std::string::npos) << table.out;
  EXPECT_NE(table.out.substr(line, table.out.find('\n', line + 1) - line).find(" YES: "), std::string::npos) << table.out;
}

TEST(StepAllocatorCli, EveryStageHasItsAllocator) {
  const std::vector<std::string> args = {"step", toy_llama(), "--seq-length", "128", "--micro-batches", "4",
                                         "--allocator", "--pp", "2"};
  const CliRun run = census(args);
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_NE(run.out.find("the caching allocator by stage (peaks):"), std::string::npos);
  std::vector<std::string> in_json = args;
  in_json.insert(in_json.end(), {"--format", "json"});
  const CliRun json = census(in_json);
  const nlohmann::json j = nlohmann::json::parse(json.out);
  for (const auto& stage : j["stages"]) EXPECT_TRUE(stage.contains("allocator"));
}

TEST(StepAllocatorCli, BadInputIsOneLineAndExitTwo) {
  const std::pair<std::vector<std::string>, const char*> refused[] = {
      {accumulated({"--alloc-conf", "expandable_segment:True"}), "'expandable_segment' is not a key"},
      {accumulated({"--alloc-conf", "max_split_size_mb:-5"}), "is negative"},
      {accumulated({"--alloc-conf", "max_split_size_mb:16"}), "below PyTorch's floor of 20"},
      {accumulated({"--alloc-conf", "expandable_segments:yes"}), "give True or False"},
      {accumulated({"--alloc-conf", "backend:cudaMallocAsync"}), "cudaMallocAsync"},
      {accumulated({"--gpu-memory", "lots"}), "--gpu-memory: 'lots' is not a size"},
      {accumulated({"--gpu-memory", "1GiB", "--cuda-context", "2147483648"}), "leaves the allocator nothing"},
      {accumulated({"--fragmentation", "1000"}), "--fragmentation: is what --allocator simulates"},
      {{"step", toy_llama(), "--alloc-conf", "expandable_segments:True"}, "--alloc-conf: configures the simulated"},
      {{"step", toy_llama(), "--gpu-memory", "80GiB"}, "--gpu-memory: is the device the simulated allocator"},
  };
  for (const auto& [args, reason] : refused) {
    const CliRun run = census(args);
    EXPECT_EQ(run.code, 2) << reason;
    EXPECT_TRUE(run.out.empty()) << reason;
    EXPECT_NE(run.err.find(reason), std::string::npos) << run.err;
    EXPECT_EQ(run.err.find('\n'), run.err.size() - 1) << run.err;
  }
}

// census plan --reserved: the header says the memory is the reserved peak; every layout's peak is
// census step --allocator's reserved peak for its step arguments (tests/python/test_allocator.py
// checks that through Python); --alloc-conf alone, or text PyTorch refuses, is one line and exit 2.
TEST(StepAllocatorCli, PlanRanksOnReserved) {
  const std::vector<std::string> plan = {"plan", toy_llama(), "--gpus", "2", "--device", "h100", "--gpu-memory", "1GiB",
                                         "--seq-length", "128", "--top", "1"};
  std::vector<std::string> reserved = plan;
  reserved.insert(reserved.end(), {"--reserved", "--alloc-conf", "expandable_segments:True"});
  const CliRun table = census(reserved);
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("memory: RESERVED, the most-loaded stage's reserved peak"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("PYTORCH_CUDA_ALLOC_CONF \"expandable_segments:True\""), std::string::npos);
  reserved.insert(reserved.end(), {"--format", "json"});
  const nlohmann::json j = nlohmann::json::parse(census(reserved).out);
  EXPECT_EQ(j["memory"], "reserved");
  ASSERT_EQ(j["layouts"].size(), 1u);
  std::vector<std::string> step = {"step", toy_llama()};
  for (const auto& arg : j["layouts"][0]["step_args"]) step.push_back(arg.get<std::string>());
  step.insert(step.end(), {"--format", "json"});
  const CliRun stepped = census(step);
  ASSERT_EQ(stepped.code, 0) << stepped.err;
  EXPECT_EQ(j["layouts"][0]["peak_bytes"], nlohmann::json::parse(stepped.out)["allocator"]["reserved_peak"]);
  std::vector<std::string> alone = plan;
  alone.insert(alone.end(), {"--alloc-conf", "expandable_segments:True"});
  const CliRun refused = census(alone);
  EXPECT_EQ(refused.code, 2);
  EXPECT_EQ(refused.err, "census: --alloc-conf: configures the caching allocator --reserved simulates; give --reserved too\n");
  std::vector<std::string> floor = plan;
  floor.insert(floor.end(), {"--reserved", "--alloc-conf", "max_split_size_mb:8"});
  EXPECT_EQ(census(floor).code, 2);
}

}  // namespace
}  // namespace census
