// `census plan`: the choice follows from the printed peaks and time terms, every reported layout is
// what `census step` answers for its step_args, "nothing fits" names the smallest memory, and bad
// input is refused in one line with exit code 2.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "cli_run.h"

namespace census {
namespace {

using testing::CliRun;
using testing::census;
using testing::write_test_file;

// The step oracle's Llama toy: 8,655,360 B of bf16 parameters (4 layers of 557,568 parameters,
// the embedding's and the head's 4096 x 256 each, the final norm's 256).
std::string toy(bool moe = false) {
  return moe ? write_test_file("plan_toy_moe.json", R"({"model_type": "qwen3_moe", "hidden_size": 256,
    "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 32, "intermediate_size": 512,
    "num_hidden_layers": 4, "vocab_size": 4096, "max_position_embeddings": 8192, "num_experts": 8,
    "num_experts_per_tok": 2, "moe_intermediate_size": 256})")
             : write_test_file("plan_toy_llama.json", R"({"model_type": "llama", "hidden_size": 256,
    "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 32, "intermediate_size": 512,
    "num_hidden_layers": 4, "vocab_size": 4096, "max_position_embeddings": 8192})");
}

nlohmann::json plan(const std::string& config, std::vector<std::string> extra, const std::string& seq_length = "128") {
  std::vector<std::string> args = {"plan", config, "--device", "h100", "--seq-length", seq_length, "--format", "json"};
  args.insert(args.end(), extra.begin(), extra.end());
  const CliRun run = census(args);
  EXPECT_EQ(run.code, 0) << run.err;
  return nlohmann::json::parse(run.out);
}

// Two devices, one a node, two sequences a step: TP 2 would span nodes; PP 1 x DP 2 (micro-batch 1,
// ZeRO 0-3 or FSDP2), PP 2 x DP 1 (1F1B at micro-batch 1 or 2, interleaved over 2 chunks at 1: at 2 there
// is one micro-batch, not a multiple of PP) or CP 2 (micro-batch 1 or 2, ZeRO 0-3 over the CP ranks; FSDP2
// not beside CP), each under 3 recompute modes (the toy has one layer kind). Tried: DP 2 3 x 5 = 15, PP 2
// 4 x 3 = 12, CP 2 2 x 3 x 4 = 24, TP 2 2 x 3 = 6: 57; pruned: TP 2's 6 and interleaved at 2's 3; 48
// layouts, from 7 steps a recompute mode (FSDP2's its own: 21 simulated).
std::vector<std::string> two_devices() { return {"--gpus", "2", "--gpus-per-node", "1"}; }

nlohmann::json every_layout(const std::string& config) {
  std::vector<std::string> args = two_devices();
  args.insert(args.end(), {"--gpu-memory", "1TiB", "--top", "100"});
  return plan(config, args);
}

TEST(PlanCli, EveryLayoutCountedOnce) {
  const nlohmann::json all = every_layout(toy());
  EXPECT_EQ(all["counts"]["tried"], 57);
  EXPECT_EQ(all["counts"]["pruned_by_divisibility"], 9);
  EXPECT_EQ(all["pruned_by_rule"]["TP spans nodes (TP stays inside a node of 1)"], 6);
  EXPECT_EQ(all["pruned_by_rule"]["interleaved: micro-batches not a multiple of PP"], 3);
  EXPECT_EQ(all["counts"]["fit"], 48);
  EXPECT_EQ(all["layouts"].size(), 48u);
  EXPECT_EQ(all["counts"]["simulations"], 21);
  int64_t cp2 = 0, two_sequences = 0;
  for (const auto& l : all["layouts"]) {
    cp2 += l["cp"] == 2 ? 1 : 0;
    two_sequences += l["micro_batch_size"] == 2 ? 1 : 0;
    // M = B / (DP x b)
    EXPECT_EQ(l["micro_batches"].get<int64_t>() * l["dp"].get<int64_t>() * l["micro_batch_size"].get<int64_t>(), 2);
  }
  EXPECT_EQ(cp2, 24);
  EXPECT_EQ(two_sequences, 3 + 12);  // PP 2's 1F1B, and CP 2's
}

// The MoE toy on 2 devices of a node: EP 2 takes the DP x CP ranks (DP 2, or CP 2), never PP 2's single
// one, and TP 2's only with whole experts (expert TP 1, Megatron's expert_tensor_parallel_size 1): TP 2
// with its experts split at micro-batch 1 and 2, PP 2's 4 pipelines and micro-batches, 3 recompute modes
// each: 18 pruned. EP 2 layouts: DP 2 3 x 4, CP 2 2 x 3 x 4, TP 2 with whole experts 2 x 3: 42.
TEST(PlanCli, ExpertParallelTakesTheDataParallelRanks) {
  const nlohmann::json all = plan(toy(true), {"--gpus", "2", "--gpu-memory", "1TiB", "--top", "1000"});
  EXPECT_EQ(all["counts"]["not_evaluated"], 0);  // every layout shown
  EXPECT_EQ(all["pruned_by_rule"]["EP does not divide DP x CP"], 18);
  int64_t ep2 = 0, whole = 0;
  for (const auto& l : all["layouts"]) {
    if (l["ep"] != 2) continue;
    ++ep2;
    const bool whole_experts = l["expert_tp"] == 1 && l["tp"] == 2;
    whole += whole_experts ? 1 : 0;
    EXPECT_EQ((whole_experts ? l["tp"].get<int64_t>() : 1) * l["dp"].get<int64_t>() * l["cp"].get<int64_t>(), 2);
  }
  EXPECT_EQ(ep2, 42);
  EXPECT_EQ(whole, 6);
}

// EP may leave a node: one device a node still plans EP 2, its all-to-all over the NIC (50 GB/s against
// NVLink's 450: longer, for the same layout).
TEST(PlanCli, ExpertParallelAcrossNodes) {
  const std::vector<std::string> layout = {"--gpus", "2", "--layout", "ep=2", "--gpu-memory", "1TiB"};
  std::vector<std::string> apart = layout, together = layout;
  apart.insert(apart.end(), {"--gpus-per-node", "1"});
  const nlohmann::json across = plan(toy(true), apart), inside = plan(toy(true), together);
  EXPECT_GT(across["layouts"][0]["time_estimate"]["ep_communication"].get<double>(),
            inside["layouts"][0]["time_estimate"]["ep_communication"].get<double>());
}

// TP 2 and EP 2 on 2 devices: EP takes the TP ranks, so the experts stay whole (expert TP 1, as Megatron
// needs them then), said in the JSON and in the step it runs; asked to split them (etp=2), EP has no DP x
// CP ranks to take and the layout is refused.
TEST(PlanCli, ExpertParallelOverTheTensorParallelRanksKeepsTheExpertsWhole) {
  const nlohmann::json whole = plan(toy(true), {"--gpus", "2", "--layout", "tp=2,ep=2", "--gpu-memory", "1TiB"});
  ASSERT_EQ(whole["layouts"].size(), 1u);
  const auto& l = whole["layouts"][0];
  EXPECT_EQ(l["expert_tp"], 1);
  const std::vector<std::string> args = l["step_args"];
  EXPECT_NE(std::find(args.begin(), args.end(), "--expert-tp"), args.end());
  const CliRun split = census({"plan", toy(true), "--gpus", "2", "--layout", "tp=2,ep=2,etp=2", "--seq-length", "128"});
  EXPECT_EQ(split.code, 2);
  EXPECT_NE(split.err.find("EP does not divide DP x CP"), std::string::npos) << split.err;
}

// The choice is the fastest layout, by its printed estimate, among those whose simulated peak fits;
// the terms printed sum to that estimate.
TEST(PlanCli, FastestThatFitsIsChosen) {
  const nlohmann::json all = every_layout(toy());
  for (const auto& l : all["layouts"]) {
    double sum = 0;
    for (const auto& [name, seconds] : l["time_estimate"].items()) sum += seconds.get<double>();
    EXPECT_NEAR(sum, l["step_seconds_estimate"].get<double>(), 1e-12);
  }
  for (size_t i = 1; i < all["layouts"].size(); ++i)
    EXPECT_LE(all["layouts"][i - 1]["step_seconds_estimate"], all["layouts"][i]["step_seconds_estimate"]);
}

// Fits only with ZeRO-3: at one byte less than the smallest peak of any layout that is not ZeRO-3,
// every layout that fits is ZeRO-3, and the chosen one is the fastest of those. Its peak holds half
// the parameters (ZeRO-3 over DP 2: 8,655,360 / 2).
TEST(PlanCli, FitsOnlyWithZero3) {
  const nlohmann::json all = every_layout(toy());
  int64_t smallest_other = std::numeric_limits<int64_t>::max();
  for (const auto& l : all["layouts"])
    if (l["zero"] != 3) smallest_other = std::min<int64_t>(smallest_other, l["peak_bytes"]);
  std::vector<std::string> args = two_devices();
  args.insert(args.end(), {"--gpu-memory", std::to_string(smallest_other - 1), "--top", "100"});
  const nlohmann::json tight = plan(toy(), args);
  ASSERT_FALSE(tight["layouts"].empty());
  size_t zero3 = 0;
  for (const auto& l : all["layouts"]) zero3 += l["zero"] == 3 && l["peak_bytes"] < smallest_other ? 1 : 0;
  EXPECT_EQ(tight["layouts"].size(), zero3);
  for (const auto& l : tight["layouts"]) {
    EXPECT_EQ(l["zero"], 3);
    EXPECT_EQ(l["pp"], 1);
    EXPECT_EQ(l["peak_split"]["parameters"], 8'655'360 / 2);
  }
  EXPECT_EQ(tight["layouts"][0]["step_seconds_estimate"], [&] {
    double best = 1e30;
    for (const auto& l : all["layouts"])
      if (l["zero"] == 3 && l["peak_bytes"] < smallest_other) best = std::min(best, l["step_seconds_estimate"].get<double>());
    return best;
  }());
}

// Needs PP: the toy with a 65,536-token vocabulary on 2 devices of a node, one sequence a step (so DP
// is 1: TP 2 or PP 2). TP 2 keeps the embedding, the head and the fp32 logits whole on both ranks:
// its parameters are the embedding's and head's 65,536 x 256 x 2 B = 33,554,432 B each, the final
// norm's 512 B, and 4 layers of 279,040 parameters at TP 2 (q 256 x 128, k and v 256 x 32, o 128 x 256,
// gate, up and down 256 x 256, two norms of 256) = 2,232,320 B: 69,341,696 B. PP 2's last stage holds
// the head, the final norm and 2 whole layers (557,568 parameters each): 35,785,216 B. Below TP 2's
// smallest peak only PP 2 fits, and the plan chooses it. At 127 tokens CP 2 does not divide the
// sequence (CP 2 under ZeRO-3 would halve the parameters too).
TEST(PlanCli, NeedsPipeline) {
  const std::string path = write_test_file("plan_toy_vocab.json", R"({"model_type": "llama", "hidden_size": 256,
    "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 32, "intermediate_size": 512,
    "num_hidden_layers": 4, "vocab_size": 65536, "max_position_embeddings": 8192})");
  const std::vector<std::string> base = {"--gpus", "2", "--global-batch", "1", "--top", "100"};
  std::vector<std::string> args = base;
  args.insert(args.end(), {"--gpu-memory", "1TiB"});
  const nlohmann::json all = plan(path, args, "127");
  // TP 1 x PP 1 x DP 2: ZeRO 0-3 and FSDP2
  EXPECT_EQ(all["pruned_by_rule"]["DP does not divide the global batch"], 3 * 5);
  EXPECT_EQ(all["pruned_by_rule"]["CP does not divide the sequence length"], 3 * 4);  // TP 1 x CP 2
  int64_t smallest_tp = std::numeric_limits<int64_t>::max();
  for (const auto& l : all["layouts"]) {
    if (l["tp"] == 2) {
      smallest_tp = std::min<int64_t>(smallest_tp, l["peak_bytes"]);
      EXPECT_EQ(l["peak_split"]["parameters"], 69'341'696);
    } else if (l["worst_stage"] == 1) {
      EXPECT_EQ(l["peak_split"]["parameters"], 35'785'216);
    }
  }
  args = base;
  args.insert(args.end(), {"--gpu-memory", std::to_string(smallest_tp - 1)});
  const nlohmann::json tight = plan(path, args, "127");
  ASSERT_FALSE(tight["layouts"].empty());
  for (const auto& l : tight["layouts"]) {
    EXPECT_EQ(l["pp"], 2);
    EXPECT_LT(l["peak_bytes"], smallest_tp);
  }
  EXPECT_EQ(tight["counts"]["rejected_for_memory"], 3);  // TP 2 under each recompute mode
}

// Every layout reported is what census step answers for its step_args: the most-loaded stage's total.
void expect_layouts_are_steps(const std::string& config, const nlohmann::json& planned) {
  ASSERT_FALSE(planned["layouts"].empty());
  for (const auto& l : planned["layouts"]) {
    std::vector<std::string> args = {"step", config};
    for (const auto& a : l["step_args"]) args.push_back(a.get<std::string>());
    args.insert(args.end(), {"--format", "json"});
    const CliRun run = census(args);
    ASSERT_EQ(run.code, 0) << run.err;
    const nlohmann::json step = nlohmann::json::parse(run.out);
    EXPECT_EQ(step["total_bytes"], l["peak_bytes"]) << l["step_args"].dump();
    // The step ran the stage the plan found the most loaded.
    if (l["pp"] > 1) {
      EXPECT_EQ(step["stage"]["index"], l["worst_stage"]);
    }
  }
}

TEST(PlanCli, LayoutsEqualCensusStep) {
  expect_layouts_are_steps(toy(), plan(toy(), {"--gpus", "4", "--gpus-per-node", "2", "--gpu-memory", "1TiB",
                                               "--top", "12", "--cuda-context", "1000", "--master-weights", "fp32"}));
  expect_layouts_are_steps(toy(true), plan(toy(true), {"--gpus", "4", "--gpu-memory", "1TiB", "--top", "8",
                                                       "--grad-dtype", "fp32", "--global-batch", "8"}));
  // Every layout of the MoE toy on 2 devices: those at CP 2 (the ring's K/V composed, ZeRO over the
  // CP ranks) and at EP 2 (4 experts a rank) among them.
  const nlohmann::json all = plan(toy(true), {"--gpus", "2", "--gpu-memory", "1TiB", "--top", "100", "--fragmentation", "4096"});
  int64_t cp = 0, ep = 0, both = 0;
  for (const auto& l : all["layouts"]) {
    cp += l["cp"] == 2 ? 1 : 0;
    ep += l["ep"] == 2 ? 1 : 0;
    both += l["cp"] == 2 && l["ep"] == 2 ? 1 : 0;
  }
  EXPECT_GT(cp, 0);
  EXPECT_GT(ep, 0);
  EXPECT_GT(both, 0);
  expect_layouts_are_steps(toy(true), all);
}

// Liger's kernels (--liger, Transformers' loss beside them): laid out only where census step takes them (no TP,
// CP or selective policy; FSDP2 and ZeRO-3 are), each layout what census step answers with --liger (its
// step_args name it and the loss), and none above the eager modules' layout of the same shape, whose norms and
// MLPs keep more (step_liger_test.cpp).
TEST(PlanCli, LigerLaysOutWhatCensusStepTakes) {
  const std::vector<std::string> common = {"--gpus", "2", "--gpus-per-node", "2", "--gpu-memory", "1TiB", "--top", "100",
                                           "--loss", "hf"};
  std::map<std::string, int64_t> eager_peaks;
  const nlohmann::json eager_plan = plan(toy(), common, "600");
  for (const auto& l : eager_plan["layouts"]) eager_peaks[l["step_args"].dump()] = l["peak_bytes"];
  std::vector<std::string> args = common;
  args.push_back("--liger");
  const nlohmann::json planned = plan(toy(), args, "600");
  EXPECT_EQ(planned["liger"], true);
  int64_t fsdp = 0;
  for (const auto& l : planned["layouts"]) {
    const std::string shape = l["step_args"].dump();
    EXPECT_EQ(l["tp"], 1) << shape;
    EXPECT_EQ(l["cp"], 1) << shape;
    EXPECT_NE(l["recompute"], "selective") << shape;
    fsdp += l["fsdp"].get<bool>() ? 1 : 0;
    std::string eager = shape;  // the same shape without --liger, whose loss census step then takes by default
    for (const std::string flag : {",\"--liger\"", ",\"--loss\",\"hf\""}) {
      ASSERT_NE(eager.find(flag), std::string::npos) << shape;
      eager.erase(eager.find(flag), flag.size());
    }
    ASSERT_TRUE(eager_peaks.contains(eager)) << eager;
    EXPECT_LT(l["peak_bytes"].get<int64_t>(), eager_peaks[eager]) << shape;
  }
  EXPECT_GT(fsdp, 0);
  expect_layouts_are_steps(toy(), planned);
}

// TRL's and Liger's losses: laid out only where census step takes them (no TP, CP, ZeRO-3 or FSDP2), each
// layout what census step answers with the same --loss (its step_args name it), and on the Llama toy at
// 600 tokens none above the whole logits' layout of the same shape, whose fp32 (S, V) log-probabilities
// they never make, and some below it (where the optimizer's step is not the most).
TEST(PlanCli, LossesLayOutWhatCensusStepTakes) {
  std::map<std::string, int64_t> hf_peaks;
  for (const std::string loss : {"hf", "trl-chunked-nll", "liger-flce"}) {
    int64_t below = 0;
    SCOPED_TRACE(loss);
    const nlohmann::json planned = plan(toy(), {"--gpus", "2", "--gpus-per-node", "2", "--gpu-memory", "1TiB",
                                                "--top", "100", "--loss", loss}, "600");
    EXPECT_EQ(planned["loss"], loss);
    for (const auto& l : planned["layouts"]) {
      // The layout's shape, whichever stage is its most loaded (the whole logits' is the last's).
      nlohmann::json args = l["step_args"];
      for (size_t i = 0; i + 1 < args.size(); ++i)
        if (args[i] == "--stage") args.erase(args.begin() + static_cast<std::ptrdiff_t>(i), args.begin() + static_cast<std::ptrdiff_t>(i) + 2);
      const std::string shape = args.dump();
      if (loss == "hf") {
        hf_peaks[shape] = l["peak_bytes"].get<int64_t>();
        continue;
      }
      EXPECT_EQ(l["tp"], 1) << shape;
      EXPECT_EQ(l["cp"], 1) << shape;
      EXPECT_LT(l["zero"], 3) << shape;
      EXPECT_FALSE(l["fsdp"].get<bool>()) << shape;
      std::string hf_shape = shape;
      const std::string flag = ",\"--loss\",\"" + loss + "\"";
      ASSERT_NE(hf_shape.find(flag), std::string::npos) << shape;
      hf_shape.erase(hf_shape.find(flag), flag.size());
      ASSERT_TRUE(hf_peaks.contains(hf_shape)) << hf_shape;
      EXPECT_LE(l["peak_bytes"].get<int64_t>(), hf_peaks[hf_shape]) << shape;
      below += l["peak_bytes"].get<int64_t>() < hf_peaks[hf_shape] ? 1 : 0;
    }
    if (loss == "hf") continue;
    EXPECT_GT(below, 0);
    expect_layouts_are_steps(toy(), planned);
  }
}

// A shipped model at a memory that rejects some layouts by their bound, some after simulating stage 0.
TEST(PlanCli, ShippedModelLayoutsEqualCensusStep) {
  const std::vector<std::string> args = {"plan", "llama-3.1-8b", "--gpus", "8", "--device", "a100", "--gpu-memory",
                                         "18GiB", "--seq-length", "2048", "--top", "20", "--fragmentation", "512MiB",
                                         "--format", "json"};
  const CliRun run = census(args);
  ASSERT_EQ(run.code, 0) << run.err;
  const nlohmann::json planned = nlohmann::json::parse(run.out);
  EXPECT_GT(planned["counts"]["rejected_by_lower_bound"], 0);
  EXPECT_GT(planned["counts"]["rejected_by_simulation"], 0);
  for (const auto& l : planned["layouts"]) EXPECT_LE(l["peak_bytes"], 18LL << 30);
  expect_layouts_are_steps("llama-3.1-8b", planned);
}

TEST(PlanCli, NothingFitsNamesTheSmallestMemory) {
  const nlohmann::json all = every_layout(toy());
  int64_t smallest = std::numeric_limits<int64_t>::max();
  for (const auto& l : all["layouts"]) smallest = std::min<int64_t>(smallest, l["peak_bytes"]);
  std::vector<std::string> args = two_devices();
  args.insert(args.end(), {"--gpu-memory", "1MiB"});
  const nlohmann::json none = plan(toy(), args);
  EXPECT_TRUE(none["layouts"].empty());
  EXPECT_EQ(none["nothing_fits"]["smallest_memory_bytes"], smallest);
  const CliRun table = census({"plan", toy(), "--device", "h100", "--seq-length", "128", "--gpus", "2",
                               "--gpus-per-node", "1", "--gpu-memory", "1MiB"});
  EXPECT_EQ(table.code, 0);
  EXPECT_NE(table.out.find("nothing fits"), std::string::npos) << table.out;
}

// A calibration that makes the terms easy to derive: every link at its whole bandwidth with no latency,
// the attention kernel at the whole peak, no kernel floor; with --hbm-gbs 10^9 GB/s no op is memory-bound.
std::string plain_calibration() {
  return write_test_file("plain_calibration.json", R"({"gemm_efficiency": 1, "gemm_half_gflop": 1,
    "attention_forward_efficiency": 1, "attention_backward_efficiency": 1, "memory_efficiency": 1,
    "kernel_floor_us": 0, "link_efficiency": 1, "link_latency_us": 0, "nic_efficiency": 1, "nic_latency_us": 0,
    "source": "the test"})");
}

nlohmann::json plain_plan(const std::string& config, std::vector<std::string> extra) {
  extra.insert(extra.end(), {"--gpus", "2", "--gpu-memory", "1TiB", "--top", "100", "--calibration",
                             plain_calibration(), "--hbm-gbs", "1000000000"});
  return plan(config, extra);
}

// The TP term derived: TP 2 inside a node, DP 1 so M = 2 / b micro-batches of b sequences; each layer's
// 2 all-reduces forward and 2 backward (2 more under full recompute, its forward again) of
// b x 128 x 256 x 2 B, each 2 (2-1)/2 x that / 450 GB/s (H100's NVLink each way); 4 layers.
TEST(PlanCli, TensorParallelTermDerived) {
  bool seen = false;
  const nlohmann::json all = plain_plan(toy(), {});
  for (const auto& l : all["layouts"]) {
    if (l["tp"] != 2) continue;
    seen = true;
    const double b = l["micro_batch_size"], m = l["micro_batches"];
    const double collectives = l["recompute"] == "full" ? 6 : 4;
    EXPECT_NEAR(l["time_estimate"]["tp_communication"].get<double>(), m * 4 * collectives * b * 65536 / 450e9, 1e-15);
  }
  EXPECT_TRUE(seen);
}

// The CP term derived: CP 2 on 2 devices of a node, the rank's 64 tokens of each of b sequences. Per layer
// the ring's one step sends a K/V shard, b x 64 x 2 x 2 KV heads x 32 x 2 B = 16,384 b B, over 450 GB/s while
// the kernel works on half its pairs: its causal FLOPs, (2 x 64 + 1) / 128 x 2 x 8 x 64 x 64 x 64 =
// 4,227,072 b, at 989 TFLOPS, halved; only what the send takes beyond is exposed. Backward: the shard and
// its gradients (twice the bytes) against half the backward kernel (2.5 x the FLOPs); a full recompute
// runs the forward's ring again. 4 layers, M = 2 / b.
TEST(PlanCli, ContextParallelTermDerived) {
  int64_t seen = 0;
  const nlohmann::json all = plain_plan(toy(), {});
  for (const auto& l : all["layouts"]) {
    if (l["cp"] != 2) {
      EXPECT_EQ(l["time_estimate"]["cp_communication"].get<double>(), 0);
      continue;
    }
    ++seen;
    const double b = l["micro_batch_size"], m = l["micro_batches"];
    const double kernel = 4'227'072 * b / 989e12;
    const double forward = std::max(0.0, 16384 * b / 450e9 - kernel / 2);
    const double backward = std::max(0.0, 2 * 16384 * b / 450e9 - 2.5 * kernel / 2);
    const double per_layer = (l["recompute"] == "full" ? 2 : 1) * forward + backward;
    EXPECT_NEAR(l["time_estimate"]["cp_communication"].get<double>(), m * 4 * per_layer, 1e-15);
  }
  EXPECT_EQ(seen, 24);
}

// The EP term derived on the MoE toy (top-2 of 8 experts, every layer MoE) at EP 2 on 2 devices of a
// node: per layer 2 all-to-alls forward, 2 backward (2 more under full recompute) of the rank's b x
// (128 / CP) tokens x 2 x 256 x 2 B, half of it to the other rank over 450 GB/s. The DP reduction at EP 2
// x DP 2 (ZeRO-0, no overlap) is the dense gradients' alone, the experts' groups of DP x CP / EP = 1
// rank reducing nothing: the embedding and head 4096 x 256 each, the final norm 256, 4 layers of q and o
// 256 x 256, k and v 256 x 64, q_norm and k_norm 32, two norms 256, the router 8 x 256: 2,763,264
// parameters, their bf16 gradients 5,526,528 B all-reduced, 2 (2-1)/2 x that / 450 GB/s. The 6 layouts of
// TP 2 with whole experts route the same b x 128 tokens (every TP rank holds the whole sequence: no sequence
// parallelism) over the 2 consecutive ranks: 36 + 6.
// Fine-tuning (census step's --lora*, --quantize*, --autocast) is planned on one device: at global batch 4,
// b 1, 2 and 4 under no and full checkpointing, the two modes census step prices beside it: 6 layouts,
// every one simulated (no memory bound holds beside a frozen base: Note [No bound under fine-tuning]), each
// what census step answers for its step_args, which carry the run's fine-tuning flags.
TEST(PlanCli, FineTuningPlansOneDeviceAsCensusStepPricesIt) {
  const std::vector<std::vector<std::string>> runs = {
      {"--lora-rank", "16", "--lora-targets", "all-linear"},
      {"--lora", "--quantize", "nf4", "--double-quant", "--compute-dtype", "bf16"},
      {"--autocast", "bf16"},
      {"--autocast", "bf16", "--load-dtype", "bf16", "--lora-rank", "16"}};  // in census step's flag order
  for (const std::vector<std::string>& tuning : runs) {
    std::vector<std::string> args = {"--gpus", "1", "--gpu-memory", "1TiB", "--top", "100", "--global-batch", "4"};
    args.insert(args.end(), tuning.begin(), tuning.end());
    const nlohmann::json planned = plan(toy(), args);
    SCOPED_TRACE(planned["fine_tuning"].dump());
    EXPECT_EQ(planned["fine_tuning"], tuning);
    EXPECT_EQ(planned["counts"]["tried"], 6);
    EXPECT_EQ(planned["counts"]["fit"], 6);
    EXPECT_EQ(planned["counts"]["simulations"], 6);
    EXPECT_EQ(planned["counts"]["rejected_by_lower_bound"], 0);
    for (const auto& l : planned["layouts"]) {
      EXPECT_TRUE(l["recompute"] == "none" || l["recompute"] == "full") << l["step_args"].dump();
      EXPECT_EQ(l["memory_lower_bound_bytes"], 0);
      const std::vector<std::string> step_args = l["step_args"];
      ASSERT_GE(step_args.size(), tuning.size());
      EXPECT_TRUE(std::equal(tuning.begin(), tuning.end(), step_args.end() - static_cast<std::ptrdiff_t>(tuning.size())));
    }
    expect_layouts_are_steps(toy(), planned);
  }
}

// Under LoRA the optimizer steps the adapters alone. PEFT's default targets on llama, q_proj and v_proj at
// r 8, fp32: q's A 8 x 256 and B 256 x 8, v's A 8 x 256 and B 64 x 8, 6,656 a layer, 26,624 in the toy's 4.
// AdamW reads and writes each and its two fp32 moments and reads its fp32 gradient: 2 x 4 + 4 + 2 x 8 = 28 B,
// at the h100's 3350 GB/s x 0.8: 28 x 26,624 / 2.68e12 s (the frozen products' one-GEMM backwards:
// tests/plan/plan_cost_test.cpp).
TEST(PlanCli, FineTuningTimeCountsTheAdaptersAlone) {
  const std::vector<std::string> layout = {"--gpus", "1", "--gpu-memory", "1TiB", "--layout", "mbs=1,recompute=none"};
  std::vector<std::string> args = layout;
  args.push_back("--lora");
  const nlohmann::json lora = plan(toy(), args)["layouts"][0];
  const nlohmann::json full = plan(toy(), layout)["layouts"][0];
  EXPECT_NEAR(lora["time_estimate"]["optimizer_step"].get<double>(), 28.0 * 26'624 / (3350e9 * 0.8), 1e-18);
  EXPECT_LT(lora["time_estimate"]["optimizer_step"].get<double>(), full["time_estimate"]["optimizer_step"].get<double>());
  // modules_to_save's copy of the head trains too, in the base's bf16: 2 x 2 + 2 + 2 x 4 = 14 B a parameter of
  // its 4,096 x 256.
  args.insert(args.end(), {"--modules-to-save", "lm_head"});
  const nlohmann::json saved = plan(toy(), args)["layouts"][0];
  EXPECT_NEAR(saved["time_estimate"]["optimizer_step"].get<double>(),
              (28.0 * 26'624 + 14.0 * 4096 * 256) / (3350e9 * 0.8), 1e-18);
}

TEST(PlanCli, ExpertParallelTermDerived) {
  int64_t seen = 0;
  const nlohmann::json all = plain_plan(toy(true), {"--gpus-per-node", "8", "--overlap", "none"});
  for (const auto& l : all["layouts"]) {
    if (l["ep"] != 2) {
      EXPECT_EQ(l["time_estimate"]["ep_communication"].get<double>(), 0);
      continue;
    }
    ++seen;
    const double all_to_alls = l["recompute"] == "full" ? 6 : 4;
    const double tokens = l["micro_batch_size"].get<double>() * 128 / l["cp"].get<double>();
    EXPECT_NEAR(l["time_estimate"]["ep_communication"].get<double>(),
                l["micro_batches"].get<double>() * 4 * all_to_alls * 0.5 * tokens * 2 * 256 * 2 / 450e9, 1e-15);
    if (l["dp"] == 2 && l["zero"] == 0) {
      EXPECT_NEAR(l["time_estimate"]["dp_communication"].get<double>(), 2 * 0.5 * 5'526'528 / 450e9, 1e-15);
    }
  }
  EXPECT_EQ(seen, 42);
}

TEST(PlanCli, TableAndExplain) {
  const CliRun run = census({"plan", toy(), "--device", "a100", "--seq-length", "128", "--gpus", "2",
                             "--gpu-memory", "80GiB", "--explain", "--top", "2"});
  ASSERT_EQ(run.code, 0) << run.err;
  for (const char* text : {"TP inside a node", "an estimate", "pruned by divisibility", "rejected for memory",
                           "pipeline_bubble", "dp_communication", "census step", "A100"})
    EXPECT_NE(run.out.find(text), std::string::npos) << text << "\n" << run.out;
}

// With no --device the plan prices an H100 and says so in its header line.
TEST(PlanCli, DefaultDeviceIsH100) {
  const CliRun run = census({"plan", toy(), "--seq-length", "128", "--gpus", "2", "--top", "1"});
  ASSERT_EQ(run.code, 0) << run.err;
  const std::string header = run.out.substr(0, run.out.find('\n'));
  EXPECT_NE(header.find("2 x h100 (the default device; --device names another)"), std::string::npos) << header;
  const CliRun json = census({"plan", toy(), "--seq-length", "128", "--gpus", "2", "--top", "1", "--format", "json"});
  ASSERT_EQ(json.code, 0) << json.err;
  const nlohmann::json j = nlohmann::json::parse(json.out);
  EXPECT_EQ(j["device"]["name"], "h100");
  EXPECT_EQ(j["device"]["default"], true);
}

// --layout prices the one layout named, fitting or not: JSON's `layouts` holds it alone, with its
// estimate and its peak (census step's for its step_args); an omitted degree is 1 and dp what remains.
TEST(PlanCli, OneLayoutNamed) {
  const nlohmann::json fits = plan(toy(), {"--gpus", "4", "--layout", "pp=2,mbs=2,recompute=selective", "--gpu-memory", "1TiB"});
  ASSERT_EQ(fits["layouts"].size(), 1u);
  const auto& l = fits["layouts"][0];
  EXPECT_EQ(l["dp"], 2);
  EXPECT_EQ(l["tp"], 1);
  EXPECT_EQ(l["micro_batches"], 1);  // 4 sequences over DP 2 in micro-batches of 2
  EXPECT_EQ(l["recompute"], "selective");
  EXPECT_TRUE(l["fits"]);
  EXPECT_GT(l["step_seconds_estimate"].get<double>(), 0);
  expect_layouts_are_steps(toy(), fits);
  // The same layout in 1 MiB: reported with the same peak, not fitting.
  const nlohmann::json roomy = plan(toy(), {"--gpus", "4", "--layout", "pp=2", "--gpu-memory", "1TiB"});
  const nlohmann::json tight = plan(toy(), {"--gpus", "4", "--layout", "pp=2", "--gpu-memory", "1MiB"});
  ASSERT_EQ(tight["layouts"].size(), 1u);
  EXPECT_FALSE(tight["layouts"][0]["fits"]);
  EXPECT_TRUE(roomy["layouts"][0]["fits"]);
  EXPECT_EQ(tight["layouts"][0]["peak_bytes"], roomy["layouts"][0]["peak_bytes"]);
  EXPECT_EQ(tight["layouts"][0]["step_seconds_estimate"], roomy["layouts"][0]["step_seconds_estimate"]);
}

TEST(PlanCli, BadInputIsOneLine) {
  const std::string t = toy();
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"plan", t, "--gpus", "0", "--gpu-memory", "80GiB", "--device", "h100"},
           {"plan", t, "--gpus", "8", "--gpu-memory", "80GiB", "--device", "tpu9"},
           {"plan", t, "--gpus", "8", "--gpu-memory", "80XB", "--device", "h100"},
           {"plan", t, "--gpus", "8", "--gpu-memory", "lots", "--device", "h100"},
           {"plan", t, "--gpus", "8", "--gpu-memory", "0", "--device", "h100"},
           {"plan", t, "--gpus", "8", "--gpu-memory", "80GiB", "--peak-tflops", "0", "--hbm-gbs", "1",
            "--link-gbs", "1", "--nic-gbs", "1"},
           {"plan", t, "--gpus", "8", "--gpu-memory", "1GiB", "--device", "h100", "--cuda-context", "2GiB"},
           {"plan", t, "--gpus", "8", "--device", "h100", "--top", "0"},
           {"plan", t, "--gpus", "8", "--device", "h100", "--compute-efficiency", "1.5"},
           {"plan", t, "--gpus", "8", "--device", "h100", "--seq-length", "0"},
           {"plan", t, "--gpus", "4000000000", "--device", "h100"},
           {"plan", t, "--gpus", "8", "--device", "h100", "--global-batch", "100000000"},
           {"plan", t, "--gpus", "8", "--device", "h100", "--gpus-per-node", "0"},
           {"plan", t, "--gpus", "8", "--device", "h100", "--master-weights", "fp8"},
           // an optimizer of no such name; Muon, which the time model cannot rank yet; a form it lacks
           {"plan", t, "--gpus", "8", "--device", "h100", "--optimizer", "adam"},
           {"plan", t, "--gpus", "8", "--device", "h100", "--optimizer", "muon"},
           {"plan", t, "--gpus", "8", "--device", "h100", "--optimizer", "adamw8bit", "--optimizer-impl", "fused"},
           // a search of no such thing, of one thing twice, beside a named layout
           {"plan", t, "--gpus", "8", "--device", "h100", "--search", "schedule"},
           {"plan", t, "--gpus", "8", "--device", "h100", "--search", "loss,loss"},
           {"plan", t, "--gpus", "8", "--device", "h100", "--search", "loss", "--layout", "tp=8"},
           // 5 devices, 4 sequences: DP 5 does not divide them, TP 5 the heads, CP 5 the 4096 tokens, and
           // no split of the 4 layers gives 5 stages a layer or more.
           {"plan", t, "--gpus", "5", "--device", "h100", "--global-batch", "4"},
           // --layout: an unknown key, a degree that does not divide, degrees whose product is not --gpus,
           // one that breaks a rule (EP on a dense model, b not dividing the per-rank batch, TP past a node).
           {"plan", t, "--gpus", "8", "--layout", "tp=2,foo=3"},
           {"plan", t, "--gpus", "8", "--layout", "tp=2,pp"},
           {"plan", t, "--gpus", "8", "--layout", "pp=3"},
           {"plan", t, "--gpus", "8", "--layout", "tp=2,dp=2"},
           {"plan", t, "--gpus", "8", "--layout", "tp=x"},
           {"plan", t, "--gpus", "8", "--layout", "ep=2"},
           {"plan", t, "--gpus", "8", "--layout", "mbs=3"},
           {"plan", t, "--gpus", "16", "--layout", "tp=16"},
           {"plan", t, "--gpus", "8", "--layout", "recompute=sometimes"},
           // fine-tuning on more than one device; a 4-bit option without --quantize; an optimizer, a
           // checkpointing and a ZeRO stage census step does not price beside adapters; a rank of 0
           {"plan", t, "--gpus", "8", "--lora"},
           {"plan", t, "--gpus", "1", "--double-quant"},
           {"plan", t, "--gpus", "1", "--lora", "--optimizer", "adafactor"},
           {"plan", t, "--gpus", "1", "--lora", "--layout", "recompute=selective"},
           {"plan", t, "--gpus", "1", "--autocast", "bf16", "--layout", "zero=1"},
           {"plan", t, "--gpus", "1", "--lora-rank", "0"},
           {"plan", t, "--gpus", "8", "--layout", "recompute.moe=full"},
           {"plan", t, "--gpus", "8", "--layout", "zero=4"},
           {"plan", t, "--gpus", "8", "--layout", "schedule=zigzag"},
           {"plan", t, "--gpus", "8", "--layout", "tp=2,tp=4"},
           // Expert TP other than 1 or TP's; whole experts on a model without experts.
           {"plan", t, "--gpus", "8", "--layout", "tp=2,etp=3"},
           {"plan", t, "--gpus", "8", "--layout", "tp=2,etp=1"},
           // An unknown overlap switch; a calibration file with a field missing, an unknown one, not JSON,
           // not there.
           {"plan", t, "--gpus", "8", "--overlap", "fsdp_prefetch,warp_drive"},
           {"plan", t, "--gpus", "8", "--calibration", write_test_file("cal_missing.json", R"({"gemm_efficiency": 0.5,
             "gemm_half_gflop": 2, "attention_forward_efficiency": 0.4, "attention_backward_efficiency": 0.3,
             "memory_efficiency": 0.8, "kernel_floor_us": 4, "link_efficiency": 0.8, "link_latency_us": 3,
             "nic_efficiency": 0.9, "source": "no NIC latency"})")},
           {"plan", t, "--gpus", "8", "--calibration", write_test_file("cal_unknown.json", R"({"speed": 1})")},
           {"plan", t, "--gpus", "8", "--calibration", write_test_file("cal_text.json", "fast")},
           {"plan", t, "--gpus", "8", "--calibration", "/no/such/calibration.json"},
       }) {
    const CliRun run = census(args);
    EXPECT_EQ(run.code, 2) << args[2] << " " << args[3] << " " << args.back();
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
    EXPECT_TRUE(run.out.empty());
  }
}

}  // namespace
}  // namespace census
