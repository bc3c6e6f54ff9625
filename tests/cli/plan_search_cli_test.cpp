// One truth across whole searches: every layout `census plan` prints is what `census step` prints for its
// step_args, to the byte (the Llama toy, the MoE toy, the DeepSeek-V4 and Gemma 4 toys, Llama-3.1-70B on
// 64 GPUs, FSDP2 and sequence parallelism among them); every memory lower bound the search rejects by is at most the simulated peak (and the bounds
// that reject the largest models' layouts unsimulated); every pipeline
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

// The MoE toy's experts run as grouped_mm (the default) or, `eager`, as the loop over the experts hit
// (Note [Experts' gradients in the states' bound]).
std::string toy(bool moe, bool eager = false) {
  const std::string experts = eager ? R"(, "_experts_implementation": "eager")" : "";
  return moe ? write_test_file(eager ? "search_toy_moe_eager.json" : "search_toy_moe.json",
                               R"({"model_type": "qwen3_moe", "hidden_size": 256,
    "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 32, "intermediate_size": 512,
    "num_hidden_layers": 4, "vocab_size": 4096, "max_position_embeddings": 8192, "num_experts": 8,
    "num_experts_per_tok": 2, "moe_intermediate_size": 256, "mlp_only_layers": [0])" + experts + "}")
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

// The toy's search again at a memory an eighth above the smallest peak `all` printed, its top 3: the
// search rejects layouts there, by their bounds and their simulations.
nlohmann::json tight_search(const std::string& config, const nlohmann::json& all, const std::string& gpus,
                            const std::string& batch) {
  int64_t smallest = all["layouts"][0]["peak_bytes"];
  for (const auto& l : all["layouts"]) smallest = std::min<int64_t>(smallest, l["peak_bytes"]);
  return run_json({"plan", config, "--gpus", gpus, "--gpus-per-node", "2", "--seq-length", "128", "--global-batch",
                   batch, "--gpu-memory", std::to_string(smallest + smallest / 8), "--top", "3"});
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
  for (const auto& [moe, eager] : {std::pair{false, false}, std::pair{true, false}, std::pair{true, true}}) {
    const std::string config = toy(moe, eager);
    const std::string gpus = moe ? "2" : "4", batch = moe ? "4" : "8";
    // AdamW's for-loop form: the foreach one (the default) refuses the MoE toy's DTensor plan without FSDP2
    // (its router and experts stay plain tensors, and PyTorch refuses a list that mixes them in), checked below.
    const nlohmann::json all = run_json({"plan", config, "--gpus", gpus, "--gpus-per-node", "2", "--seq-length", "128",
                                         "--global-batch", batch, "--gpu-memory", "1TiB", "--top", "100000",
                                         "--master-weights", "fp32", "--cuda-context", "1000", "--optimizer-impl",
                                         "for-loop"});
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
    // FSDP2 (its own simulated step) and TP with sequence parallelism are among the layouts checked,
    // and together.
    bool fsdp = false, sp = false, both = false;
    for (const auto& l : all["layouts"]) {
      fsdp = fsdp || l["fsdp"].get<bool>();
      sp = sp || l["sequence_parallel"].get<bool>();
      both = both || (l["fsdp"].get<bool>() && l["sequence_parallel"].get<bool>());
    }
    EXPECT_TRUE(fsdp);
    EXPECT_TRUE(sp);
    EXPECT_EQ(both, !moe);  // the MoE toy's 2 devices leave DP 1 under TP 2
    if (moe) {
      const nlohmann::json foreach = run_json({"plan", config, "--gpus", gpus, "--gpus-per-node", "2", "--seq-length",
                                               "128", "--global-batch", batch, "--gpu-memory", "1TiB", "--top", "100000",
                                               "--master-weights", "fp32"});
      EXPECT_FALSE(foreach["layouts"].empty());
      for (const auto& l : foreach["layouts"]) EXPECT_FALSE(l["sequence_parallel"].get<bool>()) << l["step_args"];
    }
    const nlohmann::json tight = tight_search(config, all, gpus, batch);
    expect_one_truth(config, tight, /*every=*/true);
  }
}

// Another optimizer than AdamW (census plan --optimizer): every layout of the Llama toy on 2 devices is
// census step with that optimizer, its bound (Note [Other optimizers' states in the bounds]) at most its
// peak; ZeRO, FSDP2 and SP laid out only beside the optimizers whose states census step shards.
TEST(PlanSearch, EveryLayoutWithAnotherOptimizerIsCensusStep) {
  const std::string config = toy(false, false);
  for (const std::string optimizer : {"sgd", "adafactor", "adamw8bit", "paged-adamw8bit", "torchao-adamw4bit", "none"}) {
    SCOPED_TRACE(optimizer);
    const nlohmann::json all = run_json({"plan", config, "--gpus", "2", "--gpus-per-node", "2", "--seq-length", "128",
                                         "--global-batch", "4", "--gpu-memory", "1TiB", "--top", "100000",
                                         "--optimizer", optimizer});
    EXPECT_EQ(all["optimizer"]["name"], optimizer);
    expect_one_truth(config, all);
    const bool shards = optimizer == "sgd" || optimizer == "none";
    bool sharded = false;
    for (const auto& l : all["layouts"]) {
      sharded = sharded || l["zero"].get<int>() > 0 || l["fsdp"].get<bool>() || l["sequence_parallel"].get<bool>();
      const nlohmann::json& args = l["step_args"];
      EXPECT_EQ(std::find(args.begin(), args.end(), optimizer) != args.end(), true) << args.dump();
    }
    EXPECT_EQ(sharded, shards);
  }
}

// census plan --search loss,optimizer (Note [The search over losses and optimizers]): its layouts are the
// fastest of every combination's own plan (each run alone with --loss and --optimizer and room for all),
// equals in the order the combinations are searched, at a memory where some combinations fit fewer
// layouts than others; each layout is census step with its own loss and optimizer.
TEST(PlanSearch, SearchingLossesAndOptimizersRanksEveryCombinationsLayouts) {
  const std::string config = toy(false, false);
  const std::vector<std::string> common = {"plan", config, "--gpus", "2", "--gpus-per-node", "2", "--seq-length", "600",
                                           "--global-batch", "4", "--gpu-memory", "60MiB"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = common;
    args.insert(args.end(), extra.begin(), extra.end());
    return run_json(args);
  };
  struct Row {
    double seconds;
    std::string args;
  };
  std::vector<Row> every;
  for (const std::string loss : {"hf", "trl-chunked-nll", "liger-flce", "torchtune-chunked", "torchtune-linear"})
    for (const std::string optimizer : {"adamw", "adamw8bit", "paged-adamw8bit", "torchao-adamw8bit", "torchao-adamw4bit"}) {
      const nlohmann::json alone = with({"--loss", loss, "--optimizer", optimizer, "--top", "100000"});
      for (const auto& l : alone["layouts"]) every.push_back({l["step_seconds_estimate"].get<double>(), l["step_args"].dump()});
    }
  std::stable_sort(every.begin(), every.end(), [](const Row& a, const Row& b) { return a.seconds < b.seconds; });
  const size_t top = 12;
  ASSERT_GT(every.size(), top);
  const nlohmann::json searched = with({"--search", "loss,optimizer", "--top", std::to_string(top)});
  EXPECT_EQ(searched["search"]["losses"].size(), 5u);
  EXPECT_EQ(searched["search"]["optimizers"].size(), 5u);
  ASSERT_EQ(searched["layouts"].size(), top);
  for (size_t i = 0; i < top; ++i) EXPECT_EQ(searched["layouts"][i]["step_args"].dump(), every[i].args) << i;
  expect_one_truth(config, searched);
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
    // FSDP2 over DP 2 among them (DTensor's plan names neither family's layers: no SP).
    int64_t fsdp = 0, sp = 0;
    for (const auto& l : all["layouts"]) fsdp += l["fsdp"].get<bool>() ? 1 : 0, sp += l["sequence_parallel"].get<bool>() ? 1 : 0;
    EXPECT_GT(fsdp, 0) << family;
    EXPECT_EQ(sp, 0) << family;
    expect_one_truth(config, all);
    const nlohmann::json tight = tight_search(config, all, "2", "4");
    expect_one_truth(config, tight, /*every=*/true);
  }
}

// The step oracle's MoE toys on 4 devices, 2 a node, 8 sequences a step (FSDP2 over DP 2 and 4, beside
// PP 2 and TP 2): every layout's memory bound at most its peak (the plan's peak is census step's: the
// tests above). FSDP2's hooks unshard its root, not a layer, at the last stage's first backward, so the
// bound does not count ZeRO-3's gathered layers there. The Ernie toy's router keeps its weight fp32 in the
// bf16 model, so FSDP2 (which refuses a unit of two dtypes without a mixed-precision policy) is laid out
// only under fp32 master weights: none in its bf16 plan; under fp32 master weights its FSDP2 layout at
// DP 4 (one sequence a micro-batch, no recompute) peaks at 29,257,384 B, its bound 20,464,644 B.
TEST(PlanSearch, MemoryBoundsOfTheMoeToysOnFourDevicesAreAtMostTheirPeaks) {
  for (const std::string family : {"ernie4_5_moe", "mixtral", "qwen2_moe", "gpt_oss"}) {
    std::ifstream file(std::string(CENSUS_TEST_DATA) + "/step/" + family + "_toy_L4_s128_single.json");
    const std::string config = write_test_file("bound_toy_" + family + ".json", nlohmann::json::parse(file).at("config").dump());
    std::vector<std::string> args = {"plan", config, "--gpus", "4", "--gpus-per-node", "2", "--seq-length", "128",
                                     "--global-batch", "8", "--gpu-memory", "1TiB", "--top", "100000"};
    if (family == "ernie4_5_moe") {
      const nlohmann::json bf16 = run_json(args);
      for (const auto& l : bf16["layouts"]) EXPECT_FALSE(l["fsdp"].get<bool>()) << l["step_args"].dump();
      args.insert(args.end(), {"--master-weights", "fp32"});
    }
    const nlohmann::json all = run_json(args);
    int64_t fsdp = 0;
    for (const auto& l : all["layouts"]) {
      fsdp += l["fsdp"].get<bool>() ? 1 : 0;
      EXPECT_LE(l["memory_lower_bound_bytes"].get<int64_t>(), l["peak_bytes"].get<int64_t>())
          << family << " " << l["step_args"].dump();
    }
    EXPECT_GT(fsdp, 0) << family;
  }
}

// The hybrid Nemotron-H toy of the step oracle (a Mamba-2 layer, a MoE, an attention and an MLP), whose
// bound takes its Mamba-2 layer's backward (Note [A layer's backward in the memory bound]): every layout
// on 2 devices, 4 sequences a step, its bound at most its peak; and a tight memory, where the search
// rejects by its bounds.
TEST(PlanSearch, EveryLayoutOfTheHybridToyIsCensusStep) {
  std::ifstream file(std::string(CENSUS_TEST_DATA) + "/step/nemotron_h_toy_L4_s128_single.json");
  const std::string config = write_test_file("search_toy_nemotron_h.json", nlohmann::json::parse(file).at("config").dump());
  const nlohmann::json all = run_json({"plan", config, "--gpus", "2", "--gpus-per-node", "2", "--seq-length", "128",
                                       "--global-batch", "4", "--gpu-memory", "1TiB", "--top", "100000"});
  EXPECT_EQ(all["counts"]["fit"].get<int64_t>(), static_cast<int64_t>(all["layouts"].size()));
  EXPECT_EQ(all["counts"]["not_evaluated"], 0);
  // Pipelines, CP, EP and FSDP2 among them (DTensor's plan names none of its mixers: no SP).
  int64_t pp = 0, cp = 0, ep = 0, fsdp = 0, sp = 0;
  for (const auto& l : all["layouts"]) {
    pp += l["pp"].get<int64_t>() > 1 ? 1 : 0, cp += l["cp"].get<int64_t>() > 1 ? 1 : 0;
    ep += l["ep"].get<int64_t>() > 1 ? 1 : 0, fsdp += l["fsdp"].get<bool>() ? 1 : 0;
    sp += l["sequence_parallel"].get<bool>() ? 1 : 0;
  }
  EXPECT_GT(pp * cp * ep * fsdp, 0);
  EXPECT_EQ(sp, 0);
  expect_one_truth(config, all);
  const nlohmann::json tight = tight_search(config, all, "2", "4");
  EXPECT_GT(tight["counts"]["rejected_by_lower_bound"].get<int64_t>(), 0);
  expect_one_truth(config, tight, /*every=*/true);
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

// Layouts of the largest models priced alone (--layout prints the memory bound beside the simulated
// peak): the bound is at most the peak, and past the memory where the search relies on it to reject a
// layout unsimulated. DeepSeek-V3 on 2,048 GPUs and Qwen3-Next on 64 unpipelined under ZeRO-0 and 1 (the
// experts' gradients and states), DeepSeek-V3 unpipelined under ZeRO-3 (the gathered layers and the
// loss's backward, the peak 1.5 times the bound); and layouts near the memory, to hold the bound below
// the peak there: a pipeline's last stage, a tied head, ZeRO-3 under a pipeline. Two the search once
// simulated in vain, which their bounds now reject: DeepSeek-V4-Pro's peak inside its last layer's
// backward (Note [A layer's backward inside the model]: 87.00 GB bound, 87.27 GB peak), and Qwen3.5-122B's
// first stage under interleaved 1F1B with its layers' inputs kept by their checkpoints (Note [A layer's
// input in the memory bound]: 86.85 GB bound, 87.43 GB peak). Those inputs, 61 x 15 x 2,048 x 7,168 x 2 B
// = 26.9 GB, also take DeepSeek-V3's selective layout under ZeRO-3 from 64.97 GB past the memory.
TEST(PlanSearch, MemoryBoundsOfLargeModelsAreAtMostTheirPeaks) {
  struct Case {
    std::vector<std::string> run;
    std::string layout;
    bool past_memory;  // the bound alone exceeds the 80 GiB (else the search simulates it)
  };
  const std::vector<std::string> dsv3 = {"deepseek-v3", "--gpus", "2048", "--seq-length", "4096", "--global-batch", "15360"};
  const std::vector<std::string> next = {"qwen3-next-80b-a3b", "--gpus", "64"};
  const std::vector<Case> cases = {
      {dsv3, "cp=2,ep=64,mbs=15,recompute=full,zero=1", true},
      {dsv3, "cp=2,ep=8,mbs=15,recompute=full,zero=3", false},
      {dsv3, "cp=2,ep=8,mbs=15,recompute=selective,recompute.moe=full,zero=3", true},  // 91.83 GB, peak 92.84
      {dsv3, "cp=4,ep=8,mbs=15,recompute=none,recompute.moe=full,zero=3", false},
      {dsv3, "tp=2,cp=4,ep=4,pp=16,mbs=1,zero=2", false},
      {next, "cp=8,ep=8,mbs=8,recompute=full", true},
      {next, "cp=8,ep=8,pp=2,vpp=2,mbs=2,recompute=selective,zero=3", false},
      {{"gemma-2-9b", "--gpus", "16", "--global-batch", "64"}, "pp=2,mbs=2,recompute=selective,zero=3", false},
      {{"gpt-oss-120b", "--gpus", "64", "--seq-length", "4096", "--global-batch", "1280"}, "pp=4,ep=8,mbs=1,zero=1", false},
      {{"deepseek-v4-pro", "--gpus", "16384"}, "cp=32,ep=128,mbs=16,recompute=full,zero=2", true},
      {{"qwen3.5-122b-a10b", "--gpus", "16384"},
       "cp=8,ep=8,pp=2,vpp=8,mbs=8,recompute=selective,recompute.full_attention=full", true},
      // Peaks at the optimizer step, where the DSA indexers' parameters have neither gradient nor
      // state (Note [Parameters no gradient reaches]): the states' bound passed these peaks by 0.28,
      // 1.63 and 1.35 GB while it counted them trained.
      {{"deepseek-v4-flash", "--gpus", "8", "--seq-length", "1024", "--global-batch", "8"}, "ep=8,recompute=full,zero=1", true},
      {{"deepseek-v3.2", "--gpus", "8", "--seq-length", "1024", "--global-batch", "8"}, "ep=8,recompute=full,zero=1", true},
      {{"glm-5", "--gpus", "8", "--seq-length", "1024", "--global-batch", "8"}, "ep=8,recompute=full,zero=1", true},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"plan"};
    args.insert(args.end(), c.run.begin(), c.run.end());
    args.insert(args.end(), {"--layout", c.layout});
    const nlohmann::json plan = run_json(args);
    ASSERT_EQ(plan["layouts"].size(), 1u) << c.layout;
    const auto& l = plan["layouts"][0];
    const int64_t bound = l["memory_lower_bound_bytes"], peak = l["peak_bytes"];
    EXPECT_LE(bound, peak) << c.run[0] << " " << c.layout;
    EXPECT_EQ(bound > (int64_t{80} << 30), c.past_memory) << c.run[0] << " " << c.layout << ": bound " << bound;
  }
}

// Note [AdamW's temporaries in the states' bound]: Llama-3.1-70B on 16 GPUs, FSDP2 or ZeRO-3 under full
// recompute, peaks inside AdamW's step, at the embedding's denom: its P = 70,553,706,496 parameters'
// bf16 weights, gradients and moments at 2 + 2 + 4 B over DP 16 (fp32 master weights: 4 + 4 + 8 B),
// and the two temporaries exp_avg_sq.sqrt() and its quotient of the V x H = 128,256 x 8,192 table, at
// 2 B (4 B) over DP 16. Less the bound's 1 MiB margin, that is the bound to the byte, and the peak is at
// most a few KiB above it (the previous parameter's denom; the step counts). With sequence parallelism
// the rank holds 1 / T of every weight but the norms, the table V / T rows of it, over DP 16 / T. Where nothing fits in 30 GiB, the search simulates 60 layouts,
// not the 732 it simulated without the term.
TEST(PlanSearch, TheStatesBoundHoldsAdamWsTemporariesOfTheTable) {
  constexpr int64_t kParams = 70'553'706'496, kTable = int64_t{128'256} * 8'192, kMargin = 1 << 20;
  struct Case {
    const char* layout;
    const char* master_weights;
    int64_t tp;
  };
  for (const Case& c : std::vector<Case>{{"recompute=full,zero=3", "bf16", 1},
                                         {"recompute=full,zero=3", "fp32", 1},
                                         {"tp=2,sp=1,fsdp=1,recompute=full", "bf16", 2},
                                         {"tp=4,sp=1,fsdp=1,recompute=full", "fp32", 4}}) {
    const bool fp32 = std::string(c.master_weights) == "fp32";
    // TP shards every weight but the RMSNorms' (two a layer and the final one, 8,192 each)
    constexpr int64_t kNorms = (2 * 80 + 1) * int64_t{8'192};
    const int64_t rank_params = (kParams - kNorms) / c.tp + kNorms;
    const int64_t dp = 16 / c.tp;
    const int64_t states = (fp32 ? 16 : 8) * rank_params / dp;
    const int64_t temporaries = 2 * (kTable / c.tp * (fp32 ? 4 : 2) / dp);
    const nlohmann::json plan = run_json({"plan", "llama-3.1-70b", "--gpus", "16", "--master-weights", c.master_weights,
                                          "--layout", c.layout, "--first-step", "--optimizer-impl", "for-loop"});
    const auto& l = plan["layouts"][0];
    const int64_t bound = l["memory_lower_bound_bytes"], peak = l["peak_bytes"];
    EXPECT_EQ(l["peak_phase"], "optimizer_step") << c.layout;
    EXPECT_EQ(bound, states + temporaries - kMargin) << c.layout << " " << c.master_weights;
    EXPECT_LE(bound, peak) << c.layout << " " << c.master_weights;
    EXPECT_LT(peak - bound, kMargin + (16 << 10)) << c.layout << " " << c.master_weights;
  }
  const nlohmann::json none = run_json({"plan", "llama-3.1-70b", "--gpus", "16", "--gpu-memory", "30GiB", "--first-step",
                                        "--optimizer-impl", "for-loop"});
  EXPECT_TRUE(none["layouts"].empty());
  EXPECT_EQ(none["nothing_fits"]["smallest_memory_bytes"], int64_t{35'539'523'072});
  EXPECT_LE(none["counts"]["simulations"].get<int64_t>(), 100);
}

// A layout the first step fits and the second does not: Llama-3.1-8B on one 80 GiB H100 at 8192 tokens,
// no recompute, peaks in the loss's backward at 84,241,129,992 B in its first step, under the 85,899,345,920
// B of the device; from the second step on AdamW's states (2 x 16,060,522,496 B of bf16 moments and 291
// step counts of 4 B: 32,121,046,156 B) are alive there too: 116,362,176,148 B, which does not fit. Fit on
// the first step the plan ranks it first; on the steady state (the default) it lays it out nowhere.
TEST(PlanSearch, ALayoutThatFitsAtTheFirstStepAndNotTheSecondIsNotAdmitted) {
  constexpr int64_t kFirst = 84'241'129'992, kStates = 2 * 16'060'522'496 + 291 * 4, kDevice = int64_t{80} << 30;
  const std::vector<std::string> plan = {"plan", "llama-3.1-8b", "--gpus", "1", "--device", "h100", "--seq-length", "8192"};
  std::vector<std::string> first_args = plan;
  first_args.push_back("--first-step");
  const nlohmann::json first = run_json(first_args);
  ASSERT_FALSE(first["layouts"].empty());
  EXPECT_EQ(first["layouts"][0]["recompute"], "none");
  EXPECT_EQ(first["layouts"][0]["peak_bytes"].get<int64_t>(), kFirst);
  EXPECT_LT(kFirst, kDevice);
  const nlohmann::json steady = run_json(plan);
  ASSERT_FALSE(steady["layouts"].empty());
  for (const auto& l : steady["layouts"]) {
    EXPECT_NE(l["recompute"], "none");
    EXPECT_LE(l["peak_bytes"].get<int64_t>(), kDevice);
  }
  const nlohmann::json step = run_json({"step", "llama-3.1-8b", "--seq-length", "8192", "--recompute", "none"});
  EXPECT_EQ(step["total_bytes"].get<int64_t>(), kFirst + kStates);
  EXPECT_GT(kFirst + kStates, kDevice);
}

// The foreach form (the default) makes one temporary of every parameter's size at once: over ZeRO-3 and
// full recompute the bound is the rank's 2 + 2 + 4 B a parameter and the list's 2 B, over DP 16, less
// the margin: 70,553,706,496 x 10 / 16 - 1 MiB, and the peak (in the steady state too: the states are
// live in every pass, and the update's list tops them) is the list's moment, a few KiB above the margin.
TEST(PlanSearch, TheStatesBoundHoldsTheForeachListOfEveryParameter) {
  constexpr int64_t kParams = 70'553'706'496, kMargin = 1 << 20;
  const nlohmann::json plan = run_json({"plan", "llama-3.1-70b", "--gpus", "16", "--layout", "recompute=full,zero=3"});
  const auto& l = plan["layouts"][0];
  const int64_t bound = l["memory_lower_bound_bytes"], peak = l["peak_bytes"];
  EXPECT_EQ(l["peak_phase"], "optimizer_step");
  EXPECT_EQ(bound, (2 + 2 + 4 + 2) * kParams / 16 - kMargin);
  EXPECT_LE(bound, peak);
  EXPECT_LT(peak - bound, kMargin + (16 << 10));
}

// Note [Every backward in the memory bound]: Nemotron-H 56B on 8 GPUs, CP 8 under ZeRO-3 and full
// recompute, 8 micro-batches, peaks inside a Mamba-2 layer's backward of the second micro-batch (B1),
// every gradient of its P = 56,324,350,464 parameters made by the first: 2 B x P / 8 = 14,081,087,616 B,
// beside the parameters' as many. The bound takes that moment, and lands within 100 MB of the peak
// (56.86 GB, the states', without it). Where nothing fits 24 GiB, the search for the smallest peak
// ranks every layout by its whole bound (the activations' too, past the memory) and simulates a few
// dozen layouts, not 9,288. Under interleaved 1F1B, Qwen3.5-27B's first stage (PP 4 x 4 chunks) peaks at
// the first chunk's backward of the second micro-batch (B1.0), the three later chunks' gradients made:
// its bound, 82.86 GB from the first backward alone, lands within 1 GB of the 98.09 GB peak.
TEST(PlanSearch, EveryBackwardHoldsTheGradientsMadeBeforeIt) {
  constexpr int64_t kParams = 56'324'350'464, kGradients = 2 * kParams / 8;
  const nlohmann::json plan = run_json({"plan", "nemotron-h-56b-base-8k", "--gpus", "8", "--global-batch", "8",
                                        "--layout", "cp=8,mbs=1,recompute=full,zero=3"});
  const auto& l = plan["layouts"][0];
  const int64_t bound = l["memory_lower_bound_bytes"], peak = l["peak_bytes"];
  EXPECT_EQ(l["peak_phase"], "B1");
  EXPECT_EQ(l["peak_split"]["gradients"], kGradients);
  EXPECT_EQ(l["peak_split"]["parameters"], kGradients);
  EXPECT_LE(bound, peak);
  EXPECT_LT(peak - bound, 100'000'000);
  const nlohmann::json interleaved = run_json({"plan", "qwen3.5-27b", "--gpus", "16384", "--layout",
                                               "cp=8,pp=4,vpp=4,mbs=2,recompute=none"});
  const auto& i = interleaved["layouts"][0];
  EXPECT_EQ(i["peak_phase"], "B1.0");
  EXPECT_LE(i["memory_lower_bound_bytes"].get<int64_t>(), i["peak_bytes"].get<int64_t>());
  EXPECT_LT(i["peak_bytes"].get<int64_t>() - i["memory_lower_bound_bytes"].get<int64_t>(), 1'000'000'000);
  const nlohmann::json none = run_json({"plan", "nemotron-h-56b-base-8k", "--gpus", "8", "--gpu-memory", "24GiB"});
  EXPECT_TRUE(none["layouts"].empty());
  EXPECT_EQ(none["nothing_fits"]["smallest_memory_bytes"], peak);
  EXPECT_LE(none["counts"]["simulations"].get<int64_t>(), 100);
}

// Llama-3.1-70B on 64 H100s at 8k tokens: the layouts the search prints; and, as torchtitan lays it out,
// FSDP2 (fp32 shards under its mixed-precision policy) and TP with sequence parallelism, alone, together,
// under a pipeline (every stage), and beside ZeRO under the interleaved schedule.
TEST(PlanSearch, Llama70BOn64GpusIsCensusStep) {
  const nlohmann::json plan = run_json({"plan", "llama-3.1-70b", "--gpus", "64", "--seq-length", "8192", "--top", "5"});
  EXPECT_EQ(plan["layouts"].size(), 5u);
  expect_one_truth("llama-3.1-70b", plan, /*every=*/true);
  for (const char* layout : {"tp=2,sp=1,recompute=selective,fsdp=1", "tp=8,sp=1,pp=4,fsdp=1",
                             "tp=4,sp=1,pp=4,vpp=5,recompute=full,zero=1", "tp=8,pp=2,fsdp=1,recompute=full"}) {
    const nlohmann::json named = run_json({"plan", "llama-3.1-70b", "--gpus", "64", "--seq-length", "8192",
                                           "--master-weights", "fp32", "--layout", layout});
    expect_one_truth("llama-3.1-70b", named, /*every=*/true);
  }
}

}  // namespace
}  // namespace census
