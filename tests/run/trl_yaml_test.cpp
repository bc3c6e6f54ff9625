// TRL's `trl sft --config` files read into a Run (tests/data/trainers/trl, SOURCES.md): each field's mapping,
// TRL's and Transformers' defaults where a field is left out, and every refusal one line naming the file and
// the field.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "run/read_trainer_file.h"
#include "run/trl_yaml.h"

namespace census {
namespace {

const std::string kData = std::string(CENSUS_TEST_DATA) + "/trainers/trl/";

Result<TrainerFile> read_text(const std::string& text, int64_t world = 0, int64_t seq_length = 0) {
  return read_trl_yaml("model_name_or_path: Qwen/Qwen3-8B\n" + text, "sft.yaml", {world, false, seq_length});
}

census::Run run_of(const std::string& text) {
  auto file = read_text(text);
  EXPECT_TRUE(file.ok()) << text << ": " << (file.ok() ? "" : file.refusal().message());
  return file.ok() ? file->run : census::Run{};
}

void expect_refused(const std::string& text, const std::string& named, int64_t world = 0, int64_t seq_length = 0) {
  const auto file = read_text(text, world, seq_length);
  ASSERT_FALSE(file.ok()) << named;
  const std::string message = file.refusal().message();
  EXPECT_NE(message.find(named), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

// A file that names the model alone is TRL's defaults: max_length 1024, 8 sequences a device, checkpointing,
// bf16=True over ModelConfig's float32 load (the Trainer's autocast), adamw_torch_fused, the chunked loss.
TEST(TrlYaml, DefaultsAreTrlsAndTransformers) {
  const census::Run r = run_of("");
  EXPECT_EQ(step_command_line(r),
            "census step qwen3-8b --seq-length 1024 --micro-batch-size 8 --recompute full --optimizer-impl fused "
            "--loss trl-chunked-nll --autocast bf16 --kernels cuda");
}

TEST(TrlYaml, TheLoraRunOfTheTests) {
  auto file = read_trainer_file("trl", kData + "census-qwen3-8b-lora.yaml", {0, false, 0});
  ASSERT_TRUE(file.ok()) << file.refusal().message();
  EXPECT_EQ(step_command_line(file->run),
            "census step qwen3-8b --seq-length 2048 --micro-batch-size 2 --micro-batches 8 --recompute full "
            "--optimizer-impl fused --loss trl-chunked-nll --autocast bf16 --kernels cuda --lora --lora-rank 32 "
            "--lora-alpha 16 --lora-dropout 0.05 --lora-targets all-linear");
  EXPECT_TRUE(std::any_of(file->ignored.begin(), file->ignored.end(),
                          [](const IgnoredField& f) { return f.field == "push_to_hub"; }));
}

// TRL's shipped example names Qwen2.5-0.5B, whose config Census does not ship: given beside the file, it is read.
TEST(TrlYaml, TheShippedExampleNeedsItsModelsConfig) {
  const std::string path = kData + "f2cd577-example_config.yaml";
  auto open = read_trainer_file("trl", path, {0, false, 0});
  ASSERT_FALSE(open.ok());
  EXPECT_NE(open.refusal().message().find("model_name_or_path: 'Qwen/Qwen2.5-0.5B' has no shipped config"),
            std::string::npos);
  auto file = read_trainer_file("trl", path, {0, true, 0});
  ASSERT_TRUE(file.ok()) << file.refusal().message();
  EXPECT_EQ(file->run.seq_length, 1024);
  EXPECT_EQ(file->run.autocast, "bf16");
}

TEST(TrlYaml, EachFieldThatMovesMemory) {
  EXPECT_EQ(run_of("dtype: bfloat16\n").load_dtype, "bf16");
  EXPECT_EQ(run_of("dtype: auto\n").load_dtype, "bf16");
  EXPECT_EQ(run_of("bf16: false\ndtype: bfloat16\n").autocast, "");
  EXPECT_EQ(run_of("max_length: 1000\npad_to_multiple_of: 64\n").seq_length, 1024);
  EXPECT_EQ(run_of("gradient_checkpointing: false\n").recompute, "none");
  EXPECT_EQ(run_of("gradient_checkpointing_kwargs: {use_reentrant: true}\n").recompute, "full-reentrant");
  EXPECT_EQ(run_of("gradient_checkpointing_kwargs: {use_reentrant: false}\n").recompute, "full");
  EXPECT_EQ(run_of("optim: adamw_torch\n").optimizer_impl, "foreach");
  EXPECT_EQ(run_of("optim: paged_adamw_8bit\n").optimizer, "paged-adamw8bit");
  EXPECT_EQ(run_of("loss_type: nll\n").loss, "hf");
  EXPECT_EQ(run_of("use_liger_kernel: true\n").loss, "liger-flce");
  EXPECT_EQ(run_of("activation_offloading: true\n").offload_activations, "trl");
  const census::Run lora = run_of("use_peft: true\nlora_target_modules: [q_proj, v_proj]\nuse_dora: true\n");
  EXPECT_EQ(lora.lora_targets, "q_proj,v_proj");
  EXPECT_TRUE(lora.use_dora);
  EXPECT_EQ(*lora.lora_dropout, 0.05);
  EXPECT_EQ(run_of("use_peft: true\nlora_modules_to_save: [embed_tokens, lm_head]\n").modules_to_save,
            "embed_tokens,lm_head");
  const census::Run qlora = run_of("use_peft: true\nload_in_4bit: true\nuse_bnb_nested_quant: true\ndtype: bfloat16\n");
  EXPECT_EQ(qlora.quantize, "nf4");
  EXPECT_TRUE(qlora.double_quant);
  EXPECT_EQ(qlora.compute_dtype, "bf16");  // get_quantization_config: the load dtype
  const census::Run unset = run_of("use_peft: false\nlora_r: 64\ntorch_compile: false\n");
  EXPECT_FALSE(unset.lora);
}

TEST(TrlYaml, RefusesWhatItDoesNotPrice) {
  expect_refused("torch_compile: true\n", "sft.yaml: torch_compile: ");
  expect_refused("deepspeed: ds.json\n", "sft.yaml: deepspeed: ");
  expect_refused("fsdp: full_shard\n", "sft.yaml: fsdp: ");
  expect_refused("packing: true\n", "sft.yaml: packing: ");
  expect_refused("fp16: true\n", "sft.yaml: fp16: ");
  expect_refused("bf16: false\n", "sft.yaml: bf16: ");  // fp32 throughout
  expect_refused("dtype: float16\n", "sft.yaml: dtype: ");
  expect_refused("optim: adafactor\n", "sft.yaml: optim: ");
  expect_refused("loss_type: dft\n", "sft.yaml: loss_type: ");
  expect_refused("use_liger_kernel: true\nloss_type: chunked_nll\n", "sft.yaml: loss_type: ");
  expect_refused("load_in_8bit: true\n", "sft.yaml: load_in_8bit: ");
  expect_refused("use_peft: true\nlora_modules_to_save: {lm_head: 1}\n", "sft.yaml: lora_modules_to_save: ");
  expect_refused("use_peft: true\nlora_modules_to_save: []\n", "sft.yaml: lora_modules_to_save: is empty");
  expect_refused("neftune_noise_alpha: 5\n", "sft.yaml: neftune_noise_alpha: ");
  expect_refused("attn_implementation: eager\n", "sft.yaml: attn_implementation: ");
  expect_refused("max_length: null\n", "sft.yaml: max_length: is null");
  expect_refused("max_length: 0\n", "sft.yaml: max_length: ");
  expect_refused("per_device_train_batch_size: -1\n", "sft.yaml: per_device_train_batch_size: ");
  expect_refused("gradient_checkpointing_kwargs: {preserve_rng_state: false}\n", "gradient_checkpointing_kwargs");
  expect_refused("env: {PYTORCH_CUDA_ALLOC_CONF: expandable_segments:True}\n", "sft.yaml: env.PYTORCH_CUDA_ALLOC_CONF");
  expect_refused("not_a_field: 1\n", "sft.yaml: 'not_a_field': ");
  expect_refused("", "--world 8 with --from trl", 8);
  expect_refused("", "--seq-length beside --from", 0, 2048);
  const auto listed = read_trl_yaml("model_name_or_path: [a]\n", "sft.yaml", {});
  ASSERT_FALSE(listed.ok());
  EXPECT_EQ(listed.refusal().message(), "sft.yaml: model_name_or_path: must be a string");
  EXPECT_FALSE(read_trl_yaml("[1, 2", "sft.yaml", {}).ok());
  EXPECT_FALSE(read_trl_yaml("- a\n- b\n", "sft.yaml", {}).ok());
}

}  // namespace
}  // namespace census
