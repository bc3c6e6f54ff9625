// `census step --from TRAINER FILE`: the run a trainer's file states answers as the flags that state the same
// run (the file's "from" line prints them), flags beside the file are refused, and the flags a Run prints
// parse back to that Run.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli/step_command.h"
#include "cli_run.h"

namespace census {
namespace {

using testing::CliRun;
using testing::census;

const std::string kData = std::string(CENSUS_TEST_DATA) + "/trainers/torchtitan/";

void expect_refused(const std::vector<std::string>& args, const std::string& named) {
  testing::expect_refused_line(args, named);
}

// `census step ARGS --format json` read what --from read: the flags `flags`, whose answer it is, whole, less the
// block that says what was read. That block, for the caller to look into.
nlohmann::json expect_answers_as_flags(std::vector<std::string> args, const std::vector<std::string>& flags) {
  args.insert(args.end(), {"--format", "json"});
  const CliRun from = census(args);
  EXPECT_EQ(from.code, 0) << from.err;
  if (from.code != 0) return nullptr;
  nlohmann::json answer = nlohmann::json::parse(from.out);
  const nlohmann::json read = answer["from"];
  answer.erase("from");
  EXPECT_EQ(read["flags"].get<std::vector<std::string>>(), flags);
  std::vector<std::string> equivalent_args = {"step"};
  equivalent_args.insert(equivalent_args.end(), flags.begin(), flags.end());
  equivalent_args.insert(equivalent_args.end(), {"--format", "json"});
  const CliRun equivalent = census(equivalent_args);
  EXPECT_EQ(equivalent.code, 0) << equivalent.err;
  if (equivalent.code == 0) EXPECT_EQ(answer, nlohmann::json::parse(equivalent.out));
  return read;
}

// TRL's trl sft config of a LoRA run (tests/data/trainers/trl/census-qwen3-8b-lora.yaml): TRL's defaults beside what
// it states, the fp32 load under the Trainer's autocast among them; the answer is the flags'.
TEST(StepFromCli, TrlsSftConfigAnswersAsItsFlags) {
  const std::string config = std::string(CENSUS_TEST_DATA) + "/trainers/trl/census-qwen3-8b-lora.yaml";
  const nlohmann::json read = expect_answers_as_flags(
      {"step", "--from", "trl", config},
      {"qwen3-8b", "--seq-length", "2048", "--micro-batch-size", "2", "--micro-batches", "8", "--recompute", "full",
       "--optimizer-impl", "fused", "--loss", "trl-chunked-nll", "--autocast", "bf16", "--kernels", "cuda", "--lora",
       "--lora-rank", "32", "--lora-alpha", "16", "--lora-dropout", "0.05", "--lora-targets", "all-linear"});
  EXPECT_EQ(read["notes"].size(), 3u);
}

// The done-when of the run description: torchtitan v0.2's llama3_8b.toml on 8 GPUs prints the answer of
// the flags that state its run.
TEST(StepFromCli, TorchtitansLlama3_8bAnswersAsItsFlags) {
  const nlohmann::json read = expect_answers_as_flags(
      {"step", "--from", "torchtitan", kData + "v0.2.0-llama3_8b.toml", "--world", "8"},
      {"llama-3.1-8b", "--seq-length", "8192", "--recompute", "torchtitan-op", "--optimizer-impl", "fused", "--kernels",
       "cuda", "--dp", "8", "--fsdp", "--world", "8", "--fsdp-wrap", "torchtitan", "--master-weights", "fp32"});
  EXPECT_EQ(read["format"], "torchtitan's TOML job config, v0.2");
  EXPECT_EQ(read["notes"].size(), 1u);
}

// A torchtune recipe whose keys are all priced (llama3_1/8B_full_single_device.yaml): its sequence length is the
// data's (max_seq_len null), given beside the file; the answer is the flags'.
TEST(StepFromCli, TorchtunesFullSingleDeviceRecipeAnswersAsItsFlags) {
  const std::string recipe = std::string(CENSUS_TEST_DATA) + "/trainers/torchtune/v0.6.1-llama3_1-8B_full_single_device.yaml";
  expect_answers_as_flags({"step", "--from", "torchtune", recipe, "--seq-length", "2048"},
                          {"llama-3.1-8b", "--seq-length", "2048", "--micro-batch-size", "2", "--recompute", "full",
                           "--optimizer", "paged-adamw8bit", "--optimizer-in-backward", "--loss", "torchtune-chunked",
                           "--kernels", "cuda"});
  // Where the file states the length, --seq-length beside it is refused, even at the default's value.
  expect_refused({"step", "--from", "torchtitan", kData + "v0.2.0-llama3_8b.toml", "--world", "8", "--seq-length", "4096"},
                 "--seq-length beside --from");
}

// torchtune's distributed recipe (llama3_1/8B_full.yaml) on 8 GPUs: FSDP2 over 8, bf16 shards, every unit
// resharded, its chunked loss as the recipe runs it under FSDP2; custom_sharded_layers named in a note.
TEST(StepFromCli, TorchtunesDistributedRecipeAnswersAsItsFlags) {
  const std::string recipe = std::string(CENSUS_TEST_DATA) + "/trainers/torchtune/v0.6.1-llama3_1-8B_full.yaml";
  const nlohmann::json read = expect_answers_as_flags(
      {"step", "--from", "torchtune", recipe, "--seq-length", "2048", "--world", "8"},
      {"llama-3.1-8b", "--seq-length", "2048", "--micro-batch-size", "2", "--recompute", "full", "--optimizer-impl",
       "fused", "--loss", "torchtune-chunked", "--kernels", "cuda", "--dp", "8", "--fsdp", "--world", "8",
       "--reshard-after-forward", "true"});
  EXPECT_EQ(read["notes"].size(), 2u);
  // torchtune's linear loss runs the head outside the model, which FSDP2 is not priced beside.
  expect_refused({"step", "llama-3.1-8b", "--seq-length", "2048", "--fsdp", "--dp", "8", "--loss", "torchtune-linear"},
                 "--loss torchtune-linear with --fsdp");
}

// The table: what was read first (the flags, the ignored fields by reason, the notes), then the flags' table.
TEST(StepFromCli, TheTableSaysWhatWasRead) {
  const CliRun from = census({"step", "--from", "torchtitan", kData + "v0.1.0-llama3_8b.toml", "--world", "8"});
  ASSERT_EQ(from.code, 0) << from.err;
  EXPECT_EQ(from.out.rfind("from " + kData + "v0.1.0-llama3_8b.toml (torchtitan's TOML job config, v0.1): census step "
                           "llama-3.1-8b --seq-length 8192 --recompute torchtitan-op --optimizer-impl fused --kernels cuda --dp 8 "
                           "--fsdp --world 8 --master-weights fp32\n",
                           0),
            0u)
      << from.out;
  EXPECT_NE(from.out.find("\nignored, not priced (the gradient clip's fp32 norm of each gradient, a few hundred bytes a "
                          "tensor): training.max_norm\n"),
            std::string::npos);
  const CliRun equivalent = census({"step", "llama-3.1-8b", "--seq-length", "8192", "--recompute", "torchtitan-op",
                                    "--optimizer-impl", "fused", "--kernels", "cuda", "--dp", "8", "--fsdp",
                                    "--world", "8", "--master-weights", "fp32"});
  ASSERT_EQ(equivalent.code, 0) << equivalent.err;
  const size_t answer = from.out.find("llama-3.1-8b (llama): one rank's training step");
  ASSERT_NE(answer, std::string::npos);
  EXPECT_EQ(from.out.substr(answer), equivalent.out);
}

// Which step, the machine's overheads and how to show it are taken beside the file; the model's config too,
// where the file names a model Census does not ship.
TEST(StepFromCli, TakesTheStepAndTheMachineBesideTheFile) {
  const CliRun first = census({"step", "--from", "torchtitan", kData + "v0.2.0-llama3_8b.toml", "--world", "8",
                               "--first-step", "--cuda-context", "1GiB", "--format", "json"});
  ASSERT_EQ(first.code, 0) << first.err;
  const nlohmann::json answer = nlohmann::json::parse(first.out);
  EXPECT_EQ(answer["step"], "first");
  const std::string job = testing::write_test_file("from_405b.toml", "[model]\nname = \"llama3\"\nflavor = \"405B\"\n");
  const CliRun unshipped = census({"step", "--from", "torchtitan", job, "--world", "8"});
  EXPECT_EQ(unshipped.code, 2);
  EXPECT_NE(unshipped.err.find("model.flavor"), std::string::npos) << unshipped.err;
  const CliRun given = census({"step", "llama-3.1-70b", "--from", "torchtitan", job, "--world", "8", "--format", "json"});
  ASSERT_EQ(given.code, 0) << given.err;
  EXPECT_EQ(nlohmann::json::parse(given.out)["from"]["flags"][0], "llama-3.1-70b");
}


TEST(StepFromCli, RefusesTheRunsFlagsBesideTheFile) {
  const std::string job = kData + "v0.2.0-llama3_8b.toml";
  expect_refused({"step", "--from", "torchtitan", job, "--world", "8", "--tp", "2"}, "census: --tp beside --from: the file states the run");
  expect_refused({"step", "--from", "torchtitan", job, "--world", "8", "--tp", "1"}, "--tp beside --from");  // even at its default
  expect_refused({"step", "--from", "torchtitan", job, "--world", "8", "--liger"}, "--liger beside --from");
  expect_refused({"step", "--from", "torchtitan", job}, "data_parallel_shard_degree");
  expect_refused({"step", "--from", "axolotl", job}, "--from 'axolotl'");
  expect_refused({"step", "--from", "torchtitan"}, "--from");
  expect_refused({"step"}, "census step: give a config.json or a shipped model name");
}

// Every field of a Run printed as flags (step_flags) parses back to the same Run: the flags are a reader of
// it, and the printer leaves none out.
TEST(StepFromCli, AFlagForEveryFieldOfTheRun) {
  cli::StepArgs all;
  census::Run& r = all;
  r.model = "llama-3.1-8b";
  r.seq_length = 2048, r.micro_batch_size = 2, r.micro_batches = 4, r.pp = 2, r.schedule = "interleaved";
  r.virtual_stages = 2, r.first_stage_layers = 3, r.last_stage_layers = 5, r.embedding_as_layer = true;
  r.loss_as_layer = true, r.recompute = "none,moe=full", r.offload_activations = "trl", r.optimizer = "sgd";
  r.optimizer_impl = "foreach", r.optimizer_in_backward = true, r.first_step = true, r.loss = "trl-chunked-nll";
  r.liger = true, r.fp8 = "rowwise", r.fp8_skip_head = true, r.experts_implementation = "eager", r.kernels = "cuda";
  r.train_yaml = "my train.yaml", r.lora = true, r.lora_rank = 16, r.lora_alpha = 0.1, r.lora_dropout = 0.05;
  r.lora_targets = "q_proj,v_proj", r.lora_dtype = "bf16", r.use_dora = true, r.quantize = "nf4", r.double_quant = true;
  r.quant_storage = "bf16", r.compute_dtype = "bf16", r.bnb_version = "0.49", r.prepare_kbit = true, r.tp = 2;
  r.dp = 4, r.zero = 1, r.fsdp = true, r.cpu_offload = true, r.sequence_parallel = true, r.loss_parallel = true;
  r.world = 16, r.reshard_after_forward = "false", r.fsdp_wrap = "torchtitan", r.cp = 2, r.ep = 2, r.expert_tp = 1, r.master_weights = "fp32";
  r.grad_dtype = "fp32", r.cuda_context = 1, r.nccl_buffers = 2, r.fragmentation = 3, r.autocast = "bf16";
  r.load_dtype = "bf16";
  CLI::App app;
  cli::StepArgs parsed;
  add_step_command(app, parsed);
  std::vector<std::string> args = step_flags(r);
  args.insert(args.begin(), "step");
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments last first
  ASSERT_NO_THROW(app.parse(args));
  EXPECT_EQ(step_flags(parsed), step_flags(r));
  EXPECT_EQ(step_flags(census::Run{}).size(), 1u);  // a default Run: its model alone
  EXPECT_EQ(step_command_line(r).find("--train-yaml 'my train.yaml'") != std::string::npos, true);
}

}  // namespace
}  // namespace census
