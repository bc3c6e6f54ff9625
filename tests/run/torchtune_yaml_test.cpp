// torchtune's recipe configs read into a Run: the full-finetune configs torchtune v0.6.1 ships
// (tests/data/trainers/torchtune, SOURCES.md), each key's mapping, and every refusal one line naming the
// file and the key.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "run/torchtune_yaml.h"
#include "run/read_trainer_file.h"

namespace census {
namespace {

const std::string kData = std::string(CENSUS_TEST_DATA) + "/trainers/torchtune/";

// A minimal full-finetune recipe of the shipped 8B Llama; `extra` adds or replaces top-level keys.
std::string recipe(const std::string& extra = "", const std::string& optimizer = "torch.optim.AdamW") {
  return "model:\n  _component_: torchtune.models.llama3_1.llama3_1_8b\ntokenizer:\n  max_seq_len: 4096\n"
         "optimizer:\n  _component_: " + optimizer + "\n  lr: 2e-5\nloss:\n  _component_: "
         "torchtune.modules.loss.CEWithChunkedOutputLoss\ndtype: bf16\n" + extra;
}

Result<TrainerFile> read_text(const std::string& text, int64_t world = 0, int64_t seq_length = 0) {
  return read_torchtune_yaml(text, "recipe.yaml", {world, false, seq_length});
}

void expect_refused(const std::string& text, const std::string& named, int64_t world = 0, int64_t seq_length = 0) {
  const auto file = read_text(text, world, seq_length);
  ASSERT_FALSE(file.ok()) << named;
  const std::string message = file.refusal().message();
  EXPECT_NE(message.find(named), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

// llama3_1/8B_full_single_device.yaml: 2 sequences a batch, PagedAdamW8bit stepped in the backward, the
// chunked cross-entropy, every decoder layer checkpointed. Its tokenizer leaves max_seq_len null (a batch is
// as long as its longest sequence), so the length comes from --seq-length.
TEST(TorchtuneYaml, Llama3_1_8bFullSingleDevice) {
  const std::string path = kData + "v0.6.1-llama3_1-8B_full_single_device.yaml";
  auto open = read_trainer_file("torchtune", path, {0, false, 0});
  ASSERT_FALSE(open.ok());
  EXPECT_NE(open.refusal().message().find("tokenizer.max_seq_len: is null"), std::string::npos);
  auto file = read_trainer_file("torchtune", path, {0, false, 2048});
  ASSERT_TRUE(file.ok()) << file.refusal().message();
  EXPECT_EQ(file->format, "torchtune's recipe config, v0.6.1");
  EXPECT_EQ(step_command_line(file->run),
            "census step llama-3.1-8b --seq-length 2048 --micro-batch-size 2 --recompute full --optimizer "
            "paged-adamw8bit --optimizer-in-backward --loss torchtune-chunked --kernels cuda");
  EXPECT_TRUE(std::any_of(file->ignored.begin(), file->ignored.end(),
                          [](const IgnoredField& f) { return f.field == "checkpointer"; }));
}

// llama3_1/8B_full.yaml on 8 GPUs: full_finetune_distributed's FSDP2, each layer and the root resharded.
TEST(TorchtuneYaml, Llama3_1_8bFullOnEightGpus) {
  auto file = read_trainer_file("torchtune", kData + "v0.6.1-llama3_1-8B_full.yaml", {8, false, 2048});
  ASSERT_TRUE(file.ok()) << file.refusal().message();
  const census::Run& r = file->run;
  EXPECT_TRUE(r.fsdp);
  EXPECT_EQ(r.dp, 8);
  EXPECT_EQ(r.reshard_after_forward, "true");
  EXPECT_EQ(r.master_weights, "bf16");
  EXPECT_EQ(r.optimizer, "adamw");
  EXPECT_EQ(r.optimizer_impl, "fused");  // optimizer: fused: True
  EXPECT_EQ(file->notes.size(), 2u);     // custom_sharded_layers; Transformers' modeling
}

TEST(TorchtuneYaml, EachKeyThatMovesMemory) {
  auto run = [](const std::string& text, int64_t world = 0) {
    auto file = read_text(text, world);
    EXPECT_TRUE(file.ok()) << text << ": " << (file.ok() ? "" : file.refusal().message());
    return file.ok() ? file->run : census::Run{};
  };
  const census::Run plain = run(recipe());
  EXPECT_EQ(plain.seq_length, 4096);
  EXPECT_EQ(plain.micro_batch_size, 1);
  EXPECT_EQ(plain.recompute, "none");
  EXPECT_EQ(plain.optimizer_impl, "foreach");
  EXPECT_EQ(run(recipe("batch_size: 4\ngradient_accumulation_steps: 8\n")).micro_batches, 8);
  const census::Run offloaded =
      run(recipe("enable_activation_checkpointing: True\nenable_activation_offloading: True\n"));
  EXPECT_EQ(offloaded.recompute, "full");
  EXPECT_EQ(offloaded.offload_activations, "torchtune");
  EXPECT_EQ(run(recipe("", "torchao.optim.AdamW4bit")).optimizer, "torchao-adamw4bit");
  EXPECT_EQ(run(recipe("", "bitsandbytes.optim.AdamW8bit")).optimizer_impl, "");
  const census::Run sharded = run(recipe("fsdp_cpu_offload: True\nfsdp_reshard_after_forward: False\n"), 4);
  EXPECT_TRUE(sharded.cpu_offload);
  EXPECT_EQ(sharded.reshard_after_forward, "false");
}

TEST(TorchtuneYaml, RefusesWhatItDoesNotPrice) {
  expect_refused(recipe("compile: True\n"), "recipe.yaml: compile: torch.compile");
  expect_refused(recipe("device: cpu\n"), "recipe.yaml: device");
  expect_refused(recipe("dtype: fp32\n").replace(recipe().find("dtype: bf16\n"), 12, ""), "recipe.yaml: dtype");
  expect_refused(recipe("ac_mode: selective\n"), "recipe.yaml: ac_mode");
  expect_refused(recipe("tensor_parallel_dim: 2\n"), "recipe.yaml: tensor_parallel_dim");
  expect_refused(recipe("enable_activation_offloading: True\n"), "enable_activation_offloading");
  expect_refused(recipe("optimizer_in_bwd: True\nclip_grad_norm: 1.0\n"), "recipe.yaml: clip_grad_norm");
  expect_refused(recipe("optimizer_in_bwd: True\ngradient_accumulation_steps: 2\n"), "gradient_accumulation_steps");
  expect_refused(recipe("", "torch.optim.SGD"), "optimizer._component_");
  expect_refused(recipe("", "torch.optim.AdamW\n  amsgrad: True"), "optimizer.amsgrad");
  expect_refused(recipe("batch_size: 0\n"), "recipe.yaml: batch_size");
  expect_refused(recipe("batch_size: two\n"), "batch_size: must be a whole number");
  expect_refused(recipe("save_adapter_weights_only: False\n"), "recipe.yaml: 'save_adapter_weights_only'");
  expect_refused(recipe(), "--seq-length beside --from", 0, 1024);  // the recipe states it
  expect_refused("model:\n  _component_: torchtune.models.llama3_1.lora_llama3_1_8b\n", "LoRALinear");
  expect_refused("model:\n  _component_: torchtune.models.llama3_1.llama3_1_405b\n", "has no shipped config");
  expect_refused("model: [", "recipe.yaml:1");  // not YAML
  expect_refused("- a\n- b\n", "recipe.yaml: is not a mapping");
}

}  // namespace
}  // namespace census
