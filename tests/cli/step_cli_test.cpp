// `census step`: the JSON in the step oracle's names, the table's named terms, and bad input refused
// in one line with exit code 2.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_run.h"

namespace census {
namespace {

using testing::CliRun;
using testing::census;

// Written under the test process's own name: ctest runs the tests of this file side by side.
std::string toy_llama() {
  return testing::write_test_file("step_toy_llama.json", R"({"model_type": "llama", "hidden_size": 256,
    "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 32, "intermediate_size": 512,
    "num_hidden_layers": 4, "vocab_size": 4096, "max_position_embeddings": 8192})");
}

// `census step MODEL --seq-length 128 EXTRA...` is refused naming `named`: one line, exit code 2, nothing
// on stdout.
void expect_refused(const std::string& model, const std::vector<std::string>& extra, const std::string& named) {
  std::vector<std::string> args = {"step", model, "--seq-length", "128"};
  args.insert(args.end(), extra.begin(), extra.end());
  const CliRun run = census(args);
  EXPECT_EQ(run.code, 2) << named;
  EXPECT_TRUE(run.out.empty()) << named;
  EXPECT_NE(run.err.find(named), std::string::npos) << run.err;
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
}

// The oracle's accum_m4_adamw case (tests/data/step/llama_toy_L4_s128_accum_m4_adamw.json): the first step,
// its for-loop AdamW.
TEST(StepCli, JsonInTheOraclesNames) {
  const CliRun run = census({"step", toy_llama(), "--seq-length", "128", "--micro-batches", "4", "--first-step",
                             "--optimizer-impl", "for-loop", "--format", "json"});
  ASSERT_EQ(run.code, 0) << run.err;
  const nlohmann::json j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["peak"]["bytes"], 38'816'540);
  EXPECT_EQ(j["peak"]["phase"], "optimizer_step");
  EXPECT_EQ(j["peak"]["op"], "aten.div.Tensor");
  EXPECT_EQ(j["peak"]["split"]["parameters"], 8'655'360);
  EXPECT_EQ(j["peak"]["split"]["gradients"], 8'655'360);
  EXPECT_EQ(j["peak"]["split"]["optimizer_states"], 17'310'876);
  EXPECT_EQ(j["peak"]["split"]["other"], 4'194'944);
  EXPECT_EQ(j["other_peak"]["bytes"], 11'949'704);
  EXPECT_EQ(j["other_peak"]["phase"], "B0");
  EXPECT_EQ(j["forward_peak"]["bytes"], 28'213'904);
  EXPECT_EQ(j["backward_peak"]["phase"], "B1");
  EXPECT_EQ(j["optimizer_step_peak"]["bytes"], 38'816'540);
  EXPECT_EQ(j["parameters"]["count"], 4'327'680);
  EXPECT_EQ(j["parameters"]["bytes"], 8'655'360);
  EXPECT_EQ(j["optimizer"]["state_bytes"], 17'310'876);
  EXPECT_EQ(j["phases"].size(), 12u);
  EXPECT_EQ(j["total_bytes"], 38'816'540);
  EXPECT_EQ(j["step"], "first");
  EXPECT_EQ(j["optimizer"]["implementation"], "for-loop");
}

// Left out, the step is the steady state's with AdamW's foreach form, PyTorch's default on CUDA: the
// states (17,310,876 B) alive from the start, so the first step's peak in B1, 29,260,424 B, holds them
// too: 46,571,300 B, the steady-state oracle's accum_m4_adamw_foreach_steady. Its update's list of
// every parameter's sqrt (8,655,360 B) stays below: 8,655,360 x 3 + 17,310,876 + 128 = 43,277,084.
TEST(StepCli, TheDefaultIsTheSteadyStateWithTheForeachAdamW) {
  const CliRun run = census({"step", toy_llama(), "--seq-length", "128", "--micro-batches", "4", "--format", "json"});
  ASSERT_EQ(run.code, 0) << run.err;
  const nlohmann::json j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["step"], "steady");
  EXPECT_EQ(j["optimizer"]["implementation"], "foreach");
  EXPECT_EQ(j["peak"]["bytes"], 29'260'424 + 17'310'876);
  EXPECT_EQ(j["peak"]["phase"], "B1");
  EXPECT_EQ(j["peak"]["split"]["optimizer_states"], 17'310'876);
  EXPECT_EQ(j["optimizer_step_peak"]["bytes"], 3 * 8'655'360 + 17'310'876 + 128);
  EXPECT_EQ(j["phases"][0]["live_at_end"], 8'655'360 + 17'310'876 + 128);
}

TEST(StepCli, EveryStageWithoutStage) {
  const CliRun run = census({"step", toy_llama(), "--seq-length", "128", "--micro-batches", "4", "--pp", "2",
                             "--optimizer", "none", "--format", "json"});
  ASSERT_EQ(run.code, 0) << run.err;
  const nlohmann::json j = nlohmann::json::parse(run.out);
  ASSERT_EQ(j["stages"].size(), 2u);
  EXPECT_EQ(j["stages"][1]["stage"]["layers"], (nlohmann::json{2, 4}));
  EXPECT_TRUE(j["stages"][1]["optimizer"].is_null());
}

TEST(StepCli, OverheadsAndComposedTermsEachOnTheirOwnLine) {
  const CliRun run = census({"step", toy_llama(), "--seq-length", "128", "--micro-batches", "4", "--dp", "4",
                             "--zero", "1", "--cuda-context", "1000", "--nccl-buffers", "20", "--explain"});
  ASSERT_EQ(run.code, 0) << run.err;
  for (const char* line : {"peak (composed)", "optimizer_states", "/ 4 (ZeRO-1", "+ cuda_context", "+ nccl_buffers",
                           "+ fragmentation", "total"})
    EXPECT_NE(run.out.find(line), std::string::npos) << line;
  // ZeRO-1 over 4: the peak at B1, 29,260,424 B in the first step, with the rank's quarter of the states,
  // 17,310,876 / 4 = 4,327,719 B, alive in the steady state; plus the two overheads, 1,020 B.
  EXPECT_NE(run.out.find("33,589,163"), std::string::npos) << run.out;
}

TEST(StepCli, BadInputIsOneLineAndExitTwo) {
  const std::string toy = toy_llama();
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{"--pp", "3"}, {"--pp", "2", "--stage", "2"}, {"--stage", "-2"},
        {"--schedule", "zigzag"}, {"--schedule", "interleaved"}, {"--pp", "2", "--schedule", "interleaved", "--virtual-stages", "2", "--micro-batches", "3"},
        {"--pp", "4", "--schedule", "interleaved", "--virtual-stages", "2"}, {"--virtual-stages", "2"}, {"--recompute", "some"}, {"--optimizer", "lion"},
        {"--zero", "4"}, {"--zero", "2"}, {"--dp", "0"}, {"--cp", "3"}, {"--cp", "0"}, {"--ep", "2"}, {"--tp", "3"},
        {"--micro-batches", "0"}, {"--seq-length", "0"}, {"--master-weights", "fp8"}, {"--grad-dtype", "fp16"},
        {"--cuda-context", "-1"}, {"--format", "yaml"},
        // parallel semantics: SP without TP, FSDP2 with ZeRO, a mesh that is not the world, a degree that
        // does not divide, an FSDP2 option without FSDP2
        {"--sequence-parallel"}, {"--loss-parallel"}, {"--fsdp", "--dp", "4", "--zero", "3"}, {"--fsdp"},
        {"--dp", "2", "--tp", "2", "--world", "8"}, {"--tp", "2", "--sequence-parallel", "--seq-length", "127"},
        {"--reshard-after-forward", "true"}, {"--fsdp", "--dp", "2", "--reshard-after-forward", "maybe"},
        // FSDP2 or DTensor's plan beside context parallelism: a rank the parallel oracle does not run
        {"--fsdp", "--dp", "2", "--cp", "2"}, {"--tp", "2", "--sequence-parallel", "--cp", "2"},
        {"--tp", "2", "--loss-parallel", "--cp", "2"},
        // the optimizer's form and the first step, where there is no optimizer, or no such form
        {"--optimizer-impl", "adam8bit"}, {"--optimizer-impl", ""}, {"--optimizer", "none", "--first-step"},
        {"--optimizer", "none", "--optimizer-impl", "fused"}, {"--optimizer", "adafactor", "--optimizer-impl", "fused"},
        {"--optimizer", "adamw8bit", "--optimizer-impl", "foreach"},
        // the optimizer in the backward with no optimizer, or with gradients to accumulate
        {"--optimizer", "none", "--optimizer-in-backward"}, {"--optimizer-in-backward", "--micro-batches", "2"},
        // an optimizer whose states are laid out by rows, columns or blocks, on flat or DTensor shards
        {"--optimizer", "adafactor", "--dp", "2", "--zero", "1"}, {"--optimizer", "sgd", "--master-weights", "fp32"}, {"--optimizer", "paged-adamw8bit", "--fsdp", "--dp", "2"},
        // a loss of no such name; TRL's chunked loss over a sharded head or sequence
        {"--optimizer", "muon", "--optimizer-in-backward"}, {"--optimizer", "muon", "--optimizer-impl", "foreach"},
        {"--optimizer", "muon", "--fsdp", "--dp", "2"},
        {"--loss", "chunked"}, {"--loss", "trl-chunked-nll", "--tp", "2"}, {"--loss", "trl-chunked-nll", "--fsdp", "--dp", "2"},
        {"--loss", "trl-chunked-nll", "--dp", "2", "--zero", "3"}, {"--loss", "trl-chunked-nll", "--cp", "2"},
        {"--loss", "liger-flce", "--tp", "2"}, {"--loss", "torchtune-chunked", "--cp", "2"},
        {"--loss", "torchtune-linear", "--fsdp", "--dp", "2"},
        // Liger's kernels beside a layout or a policy not priced with them
        {"--liger", "--tp", "2"}, {"--liger", "--tp", "2", "--sequence-parallel"}, {"--liger", "--cp", "2"},
        {"--liger", "--recompute", "torchtitan-op"}, {"--liger", "--offload-activations", "torchtune"},
        // FSDP2's CPU offloading without FSDP2, or beside a layout it is not priced with
        {"--cpu-offload"}, {"--cpu-offload", "--dp", "2", "--zero", "3"},
        {"--cpu-offload", "--fsdp", "--dp", "2", "--tp", "2", "--sequence-parallel"},
        {"--cpu-offload", "--fsdp", "--dp", "2", "--pp", "2"}, {"--cpu-offload", "--fsdp", "--dp", "2", "--liger"},
        {"--cpu-offload", "--fsdp", "--dp", "2", "--offload-activations", "trl"},
        {"--cpu-offload", "--fsdp", "--dp", "2", "--optimizer", "adamw8bit"},
        // FP8 of no such recipe, or beside a layout or policy it is not priced with
        {"--fp8", "mxfp8"}, {"--fp8", "rowwise", "--tp", "2"}, {"--fp8", "rowwise", "--pp", "2"},
        {"--fp8", "tensorwise", "--recompute", "selective"}, {"--fp8", "rowwise", "--liger"},
        {"--fp8", "rowwise", "--loss", "trl-chunked-nll"}, {"--fp8-skip-head"},
        // LoRA: a rank of 0, an alpha or a dropout out of range, targets that are no module or match none,
        // the LM head, adapters beside a layout, a policy or an optimizer they are not priced with
        {"--lora-rank", "0"}, {"--lora-rank", "2000000"}, {"--lora-alpha", "0"}, {"--lora-alpha", "-1"},
        {"--lora-dropout", "1"}, {"--lora-dropout", "nan"}, {"--lora-targets", ""}, {"--lora-targets", ","},
        {"--lora-targets", "q_proj,.*"}, {"--lora-targets", "embed_tokens"}, {"--lora-targets", "q_proj,w1"},
        {"--lora-targets", "lm_head", "--loss", "trl-chunked-nll"}, {"--lora-dtype", "fp16"}, {"--lora", "--tp", "2"}, {"--lora", "--pp", "2"},
        {"--lora", "--fsdp", "--dp", "2"}, {"--lora", "--dp", "2", "--zero", "1"}, {"--lora", "--fp8", "rowwise"},
        {"--lora", "--liger"}, {"--lora", "--recompute", "selective"},
        {"--lora", "--optimizer", "adafactor"}, {"--lora", "--optimizer-in-backward"},
        {"--lora", "--loss", "torchtune-linear"}, {"--lora", "--loss", "torchtune-chunked"},
        {"--lora", "--offload-activations", "torchtune"}, {"--lora", "--master-weights", "fp32", "--dp", "2", "--zero", "1"},
        // A 4-bit base with nothing to train, of no such type or dtype, its options without it, bf16 adapters
        // PEFT would make fp32, and beside a layout
        {"--quantize", "nf4"}, {"--lora", "--quantize", "int4"}, {"--lora", "--quantize", "nf4", "--quant-storage", "fp16"},
        {"--lora", "--quantize", "nf4", "--compute-dtype", "fp16"}, {"--lora", "--quantize", "nf4", "--bnb-version", "0.48"},
        {"--lora", "--double-quant"}, {"--lora", "--prepare-kbit"}, {"--lora", "--compute-dtype", "bf16"},
        {"--lora-dtype", "bf16", "--quantize", "nf4"},
        {"--lora", "--quantize", "nf4", "--fsdp", "--dp", "2"},
        // modules_to_save: a module Census does not save, none at all, one also a target
        {"--modules-to-save", "model.norm"}, {"--modules-to-save", ","}, {"--modules-to-save", ""},
        {"--modules-to-save", "lm_head", "--lora-targets", "q_proj,lm_head"}}) {
    std::vector<std::string> args = {"step", toy};
    args.insert(args.end(), extra.begin(), extra.end());
    const CliRun run = census(args);
    EXPECT_EQ(run.code, 2) << extra[0];
    EXPECT_TRUE(run.out.empty()) << extra[0];
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
  }
}

// LoRA on a model type it is not checked on, PEFT's default targets where PEFT finds none (Mixtral), and
// all-linear or the experts on a mixture of experts: refused by name.
TEST(StepCli, LoraWhereItIsNotPricedIsRefusedByName) {
  for (const auto& [args, start] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"step", "deepseek-v3", "--lora"}, "census: --lora on deepseek_v3: "},
           {{"step", "mixtral-8x7b", "--lora"}, "census: --lora-targets: "},
           {{"step", "mixtral-8x7b", "--lora-targets", "all-linear"}, "census: --lora-targets all-linear on mixtral: "},
           {{"step", "mixtral-8x7b", "--lora-targets", "q_proj,w1"}, "census: --lora-targets w1 on mixtral: "},
           {{"step", "phi-4", "--lora-targets", "all-linear", "--quantize", "nf4"}, "census: --quantize on phi3: "}}) {
    const CliRun run = census(args);
    EXPECT_EQ(run.code, 2);
    EXPECT_TRUE(run.out.empty());
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
    EXPECT_EQ(run.err.find(start), 0u) << run.err;
  }
}

// Liger's fused loss on a model type Liger does not patch (Family::liger_patches): refused by name.
TEST(StepCli, LigersLossOnAModelLigerDoesNotPatchIsRefused) {
  const CliRun run = census({"step", "deepseek-v3", "--loss", "liger-flce"});
  EXPECT_EQ(run.code, 2);
  EXPECT_TRUE(run.out.empty());
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
  EXPECT_NE(run.err.find("deepseek_v3"), std::string::npos) << run.err;
}

// Liger's kernels on a model type whose patch swaps other modules (Mixtral's experts): refused by name.
TEST(StepCli, LigersKernelsOnAModelTheyAreNotPricedOnAreRefused) {
  const CliRun run = census({"step", "mixtral-8x7b", "--liger"});
  EXPECT_EQ(run.code, 2);
  EXPECT_TRUE(run.out.empty());
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
  EXPECT_EQ(run.err.find("census: --liger on mixtral: "), 0u) << run.err;
}

// --liger brings Liger's fused loss with its kernels; --loss names another, and the JSON says which ran.
TEST(StepCli, LigerTakesItsFusedLossUnlessTheLossIsNamed) {
  const std::string toy = toy_llama();
  const CliRun fused = census({"step", toy, "--liger", "--format", "json"});
  ASSERT_EQ(fused.code, 0) << fused.err;
  const auto j = nlohmann::json::parse(fused.out);
  EXPECT_EQ(j.at("loss"), "liger-flce");
  EXPECT_EQ(j.at("liger"), true);
  const CliRun hf = census({"step", toy, "--liger", "--loss", "hf", "--format", "json"});
  ASSERT_EQ(hf.code, 0) << hf.err;
  EXPECT_EQ(nlohmann::json::parse(hf.out).at("loss"), "hf");
  const CliRun table = census({"step", toy, "--liger"});
  EXPECT_NE(table.out.find("Liger's kernels, loss liger-flce"), std::string::npos) << table.out;
}

// torchtune's losses run the bare head (model.output): on a model that transforms its logits (Gemma 2's
// softcapping) they would train another model, and are refused by name.
TEST(StepCli, TorchtunesLossOnAModelThatTransformsItsLogitsIsRefused) {
  for (const char* loss : {"torchtune-chunked", "torchtune-linear"}) {
    const CliRun run = census({"step", "gemma-2-9b", "--loss", loss});
    EXPECT_EQ(run.code, 2);
    EXPECT_TRUE(run.out.empty());
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
    EXPECT_NE(run.err.find("on gemma2"), std::string::npos) << run.err;
  }
}

// FSDP2 or DTensor's plan beside expert parallelism (an all-to-all dispatch, not simulated): refused by
// name, one line, exit code 2; each alone runs.
TEST(StepCli, ParallelCombinationsTheOracleDoesNotRunAreRefused) {
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{"--fsdp", "--dp", "2", "--ep", "2"}, {"--tp", "2", "--sequence-parallel", "--ep", "2"},
        {"--tp", "2", "--loss-parallel", "--ep", "2"}}) {
    std::vector<std::string> args = {"--optimizer", "none"};
    args.insert(args.end(), extra.begin(), extra.end());
    expect_refused("qwen3-30b-a3b", args, "with --ep 2");
  }
}

// DTensor's plan beside a divided expert width (it keeps the experts whole): refused by name, one line,
// exit code 2.
TEST(StepCli, ParallelModesBesideExpertTpAreRefused) {
  expect_refused("qwen3-30b-a3b", {"--optimizer", "none", "--tp", "2", "--sequence-parallel", "--expert-tp", "2"},
                 "--sequence-parallel with --expert-tp 2");
}

// AdamW's foreach and fused forms over DTensor's plan on its own (no FSDP2): PyTorch refuses a foreach or
// fused op over a list that mixes DTensors with the plain tensors the plan leaves (Qwen3's q_norm, a MoE
// block's router and experts, the norms without sequence parallelism: the parallel oracle's
// qwen3_moe tp2_sp and llama tp2_nosp cases raise "got mixed torch.Tensor and DTensor"); and the fused
// kernel's own redistributions of the gradients, where every parameter is a DTensor, are not priced.
// Each refused by name, one line, exit code 2; under FSDP2, or with the for-loop form, the step runs.
TEST(StepCli, AdamWsListFormsOverDTensorsAloneAreRefused) {
  for (const auto& [model, extra, named] :
       {std::tuple{"qwen3-30b-a3b", std::vector<std::string>{"--tp", "2", "--sequence-parallel"},
                   "--optimizer-impl foreach with --sequence-parallel"},
        std::tuple{"qwen3-30b-a3b", std::vector<std::string>{"--tp", "2", "--sequence-parallel", "--optimizer-impl", "fused"},
                   "--optimizer-impl fused with --sequence-parallel"},
        std::tuple{"llama-3.1-8b", std::vector<std::string>{"--tp", "2", "--loss-parallel"},
                   "--optimizer-impl foreach with --loss-parallel"},
        std::tuple{"llama-3.1-8b", std::vector<std::string>{"--tp", "2", "--sequence-parallel", "--optimizer-impl", "fused"},
                   "--optimizer-impl fused with --sequence-parallel"}})
    expect_refused(model, extra, named);
  for (const std::vector<std::string>& runs :
       {std::vector<std::string>{"step", "qwen3-30b-a3b", "--seq-length", "128", "--tp", "2", "--sequence-parallel",
                                 "--optimizer-impl", "for-loop"},
        std::vector<std::string>{"step", "llama-3.1-8b", "--seq-length", "128", "--tp", "2", "--sequence-parallel"},
        std::vector<std::string>{"step", "qwen3-30b-a3b", "--seq-length", "128", "--tp", "2", "--sequence-parallel",
                                 "--fsdp", "--dp", "2", "--master-weights", "fp32"}})
    EXPECT_EQ(census(runs).code, 0) << runs[1] << " " << runs.back();
}

// Hunyuan's router keeps its weight (mlp.gate.wg) in fp32 in a bf16 model. FSDP2 without a mixed-precision
// policy refuses such a unit (fully_shard: "FSDP expects uniform original parameter dtype"), so --fsdp
// without --master-weights fp32 is refused by the parameter's name, one line, exit code 2; under fp32
// master weights (fp32 shards, every parameter all-gathered in bf16) the step runs.
TEST(StepCli, FsdpWithoutAPolicyRefusesAUnitOfTwoDtypes) {
  const std::string hunyuan = testing::write_test_file("step_toy_hunyuan.json", R"({"model_type": "hunyuan_v1_moe",
    "hidden_size": 256, "intermediate_size": 256, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 32,
    "num_hidden_layers": 4, "vocab_size": 4096, "max_position_embeddings": 8192, "num_experts": 8, "moe_topk": 2})");
  const std::vector<std::string> args = {"step", hunyuan, "--seq-length", "128", "--optimizer", "none", "--fsdp", "--dp", "4"};
  const CliRun refused = census(args);
  EXPECT_EQ(refused.code, 2);
  EXPECT_TRUE(refused.out.empty());
  EXPECT_NE(refused.err.find("--fsdp without --master-weights fp32"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("model.layers.0.mlp.gate.wg.weight"), std::string::npos) << refused.err;
  EXPECT_EQ(std::count(refused.err.begin(), refused.err.end(), '\n'), 1) << refused.err;
  std::vector<std::string> mixed = args;
  mixed.insert(mixed.end(), {"--master-weights", "fp32"});
  EXPECT_EQ(census(mixed).code, 0);
}

// A config.json that ties the LM head to the embedding is stepped with one shared weight: the Llama
// toy's parameters less the head's 4096 x 256 (tests/step/step_tied_test.cpp).
TEST(StepCli, TiedEmbeddingsShareOneWeight) {
  const std::string path = ::testing::TempDir() + "/step_toy_tied.json";
  std::ofstream(path) << R"({"model_type": "llama", "hidden_size": 256, "num_attention_heads": 8,
    "num_key_value_heads": 2, "head_dim": 32, "intermediate_size": 512, "num_hidden_layers": 4, "vocab_size": 4096,
    "tie_word_embeddings": true})";
  const CliRun run = census({"step", path, "--seq-length", "128", "--optimizer", "none", "--format", "json"});
  ASSERT_EQ(run.code, 0) << run.err;
  const auto j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["parameters"]["count"], 4'327'680 - 1'048'576);
  EXPECT_EQ(j["peak"]["bytes"], 20'605'064 - 2'097'152);
}

// The parallel oracle's llama_toy_L4_s128_fsdp4_single (tests/data/step/parallel/): FSDP2 over 4 ranks,
// fp32 shards under MixedPrecisionPolicy(bf16, fp32), with FSDP2's parts of other and the semantics named.
TEST(StepCli, Fsdp2OnTheRankInJson) {
  const CliRun run = census({"step", toy_llama(), "--seq-length", "128", "--optimizer", "none", "--fsdp", "--dp", "4",
                             "--master-weights", "fp32", "--format", "json"});
  ASSERT_EQ(run.code, 0) << run.err;
  const nlohmann::json j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["peak"]["bytes"], 21'655'952);
  EXPECT_EQ(j["peak"]["phase"], "F0");
  EXPECT_EQ(j["peak"]["split"]["parameters"], 4'327'680);
  EXPECT_EQ(j["peak"]["split"]["other_detail"]["fsdp_unsharded_params"], 5'309'952);
  EXPECT_EQ(j["parallel"]["data_parallel"]["semantics"], "fsdp2");
  EXPECT_EQ(j["parallel"]["fsdp"]["mp_policy"]["reduce_dtype"], "float32");
  EXPECT_EQ(j["parallel"]["world_size"], 4);
}

}  // namespace
}  // namespace census

namespace census {
namespace {

// A MoE config that asks for the load-balancing loss (output_router_logits) keeps every layer's router
// logits through the forward: not priced yet, so `step` and `stack` refuse it by name, never drop it.
TEST(StepCli, RefusesTheLoadBalancingLossItDoesNotPrice) {
  const std::string path = ::testing::TempDir() + "/step_toy_router_logits.json";
  std::ofstream(path) << R"({"model_type": "qwen3_moe", "hidden_size": 256, "num_attention_heads": 8,
    "num_key_value_heads": 2, "head_dim": 32, "intermediate_size": 512, "moe_intermediate_size": 128,
    "num_experts": 8, "num_experts_per_tok": 2, "num_hidden_layers": 4, "vocab_size": 4096,
    "output_router_logits": true})";
  for (const char* command : {"step", "stack"}) {
    const CliRun run = census({command, path, "--seq-length", "128"});
    EXPECT_EQ(run.code, 2) << command;
    EXPECT_TRUE(run.out.empty()) << command;
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
    EXPECT_NE(run.err.find("output_router_logits"), std::string::npos) << run.err;
  }
  EXPECT_EQ(census({"layer", path, "--seq-length", "128"}).code, 0);  // one layer's census is unchanged by it
}

// torchtitan v0.2's FSDP2 units (--fsdp-wrap torchtitan) are checked against the oracle under FSDP2 alone,
// on a head of its own: beside TP, without FSDP2, or on a tied head they are refused by name.
TEST(StepCli, TorchtitansUnitsAreRefusedWhereTheyAreNotPriced) {
  expect_refused(toy_llama(), {"--fsdp-wrap", "torchtitan"}, "--fsdp-wrap: names FSDP2's units; give --fsdp");
  expect_refused(toy_llama(), {"--fsdp", "--dp", "4", "--fsdp-wrap", "ring"}, "--fsdp-wrap");
  expect_refused(toy_llama(), {"--fsdp", "--dp", "2", "--tp", "2", "--fsdp-wrap", "torchtitan"},
                 "--fsdp-wrap torchtitan with --tp");
  const std::string tied = testing::write_test_file("step_toy_llama_tied.json", R"({"model_type": "llama",
    "hidden_size": 256, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 32, "intermediate_size": 512,
    "num_hidden_layers": 4, "vocab_size": 4096, "max_position_embeddings": 8192, "tie_word_embeddings": true})");
  expect_refused(tied, {"--fsdp", "--dp", "4", "--fsdp-wrap", "torchtitan"}, "ties its head to its embedding");
  const CliRun run = census({"step", toy_llama(), "--seq-length", "128", "--fsdp", "--dp", "4", "--fsdp-wrap",
                             "torchtitan", "--format", "json"});
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_NE(run.out.find("fully_shard of the embedding, each decoder layer, [final norm, head], then the root"),
            std::string::npos);
}

// The HF Trainer's autocast (--autocast bf16): a dtype it has no lists for, a model type the oracle does not
// check, experts Transformers cannot run in fp32, and a layout, base, loss or checkpointing it is not priced
// beside: one line naming the option, exit 2, nothing on stdout.
TEST(StepCli, AutocastWhereItIsNotPricedIsRefusedByName) {
  const std::string toy = toy_llama();
  for (const auto& [args, start] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"step", toy, "--autocast", "fp16"}, "census: --autocast: "},
           {{"step", "gpt-oss-20b", "--autocast", "bf16"}, "census: --autocast on gpt_oss: "},
           {{"step", "qwen3-next-80b-a3b", "--autocast", "bf16"}, "census: --autocast on qwen3_next's experts (layer 0): "},
           {{"step", toy, "--autocast", "bf16", "--fsdp", "--dp", "2"}, "census: --autocast with --fsdp: "},
           {{"step", toy, "--autocast", "bf16", "--lora", "--quantize", "nf4"}, "census: --autocast with --quantize: "},
           {{"step", toy, "--autocast", "bf16", "--use-dora"}, "census: --autocast with --use-dora: "},
           {{"step", toy, "--autocast", "bf16", "--recompute", "selective"}, "census: --autocast with --recompute: "},
           {{"step", toy, "--autocast", "bf16", "--offload-activations", "torchtune"},
            "census: --autocast with --offload-activations torchtune: "},
           {{"step", toy, "--autocast", "bf16", "--loss", "torchtune-chunked"},
            "census: --autocast with --loss torchtune-chunked: "},
           {{"step", toy, "--load-dtype", "fp32"}, "census: --load-dtype fp32 without --autocast: "},
           {{"step", toy, "--autocast", "bf16", "--load-dtype", "int8"}, "census: --load-dtype: "},
           {{"step", "qwen3-30b-a3b", "--autocast", "bf16", "--load-dtype", "fp32"},
            "census: --autocast on qwen3_moe's experts (layer 0): "}}) {
    const CliRun run = census(args);
    EXPECT_EQ(run.code, 2) << run.err;
    EXPECT_TRUE(run.out.empty());
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
    EXPECT_EQ(run.err.find(start), 0u) << run.err;
  }
}

// Under --autocast every parameter is fp32 (4 B), and so are its gradient and AdamW's two states; the JSON
// says which autocast ran.
TEST(StepCli, AutocastPricesFp32WeightsAndSaysSo) {
  const CliRun run = census({"step", toy_llama(), "--seq-length", "128", "--autocast", "bf16", "--format", "json"});
  ASSERT_EQ(run.code, 0) << run.err;
  const nlohmann::json j = nlohmann::json::parse(run.out);
  const int64_t count = j.at("parameters").at("count");
  EXPECT_EQ(j.at("parameters").at("bytes"), 4 * count);
  EXPECT_EQ(j.at("autocast").at("dtype"), "bfloat16");
  EXPECT_EQ(j.at("autocast").at("weights"), "float32");
  // Loaded in bf16 (--load-dtype bf16): 2 B a parameter, and a mixture of experts runs.
  const CliRun bf16 = census({"step", toy_llama(), "--seq-length", "128", "--autocast", "bf16", "--load-dtype", "bf16",
                              "--format", "json"});
  ASSERT_EQ(bf16.code, 0) << bf16.err;
  EXPECT_EQ(nlohmann::json::parse(bf16.out).at("parameters").at("bytes"), 2 * count);
  EXPECT_EQ(census({"step", "qwen3-30b-a3b", "--seq-length", "256", "--autocast", "bf16", "--load-dtype", "bf16"}).code,
            0);
  // --lora-dtype bf16 on the fp32 base: PEFT makes fp32 adapters, and the answer says so where it prices them.
  const CliRun adapters = census({"step", toy_llama(), "--seq-length", "128", "--autocast", "bf16", "--lora-dtype",
                                  "bf16", "--format", "json"});
  ASSERT_EQ(adapters.code, 0) << adapters.err;
  const nlohmann::json lora = nlohmann::json::parse(adapters.out).at("lora");
  EXPECT_EQ(lora.at("adapter_dtype"), "float32");
  EXPECT_EQ(lora.at("trainable_parameters").at("bytes"), 4 * lora.at("trainable_parameters").at("count").get<int64_t>());
}

}  // namespace
}  // namespace census
