// torchtitan's TOML job config read into a Run: the files torchtitan v0.1 and v0.2 ship (tests/data/
// trainers/torchtitan, SOURCES.md), each field's mapping, and every refusal one line naming the file and
// the field.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "run/torchtitan_toml.h"
#include "run/read_trainer_file.h"

namespace census {
namespace {

const std::string kData = std::string(CENSUS_TEST_DATA) + "/trainers/torchtitan/";

TrainerFile read_shipped(const std::string& name, int64_t world) {
  auto file = read_trainer_file("torchtitan", kData + name, {world, false});
  EXPECT_TRUE(file.ok()) << (file.ok() ? "" : file.refusal().message());
  return file.ok() ? file.take() : TrainerFile{};
}

// The run of a job file's `text` (its other fields torchtitan's defaults).
Result<TrainerFile> read_text(const std::string& text, int64_t world = 8) {
  return read_torchtitan_toml(text, "job.toml", {world, false});
}

// A minimal file: the shipped 8B Llama, every other field torchtitan's default.
const std::string kModel = "[model]\nname = \"llama3\"\nflavor = \"8B\"\n";

// `text` is refused naming `field` (after the file's name), one line.
void expect_refused(const std::string& text, const std::string& field, int64_t world = 8) {
  const auto file = read_text(text, world);
  ASSERT_FALSE(file.ok()) << field;
  const std::string message = file.refusal().message();
  EXPECT_NE(message.find(field), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

bool ignored(const TrainerFile& file, const std::string& field) {
  return std::any_of(file.ignored.begin(), file.ignored.end(), [&](const IgnoredField& f) { return f.field == field; });
}

// v0.2's llama3_8b.toml ("a preset for 64 A100 GPUs", run here on 8): FSDP2 over every GPU
// (data_parallel_shard_degree = -1), fp32 shards under MixedPrecisionPolicy(bf16, fp32), every block resharded
// after forward, the per-op selective policy, fused AdamW, 8,192 tokens a sequence, one sequence a rank.
TEST(TorchtitanToml, Llama3_8bOfV02) {
  const TrainerFile file = read_shipped("v0.2.0-llama3_8b.toml", 8);
  const census::Run& r = file.run;
  EXPECT_EQ(file.format, "torchtitan's TOML job config, v0.2");
  EXPECT_EQ(r.model, "llama-3.1-8b");
  EXPECT_EQ(r.seq_length, 8192);
  EXPECT_EQ(r.micro_batch_size, 1);
  EXPECT_EQ(r.micro_batches, 1);
  EXPECT_EQ(r.recompute, "torchtitan-op");
  EXPECT_EQ(r.optimizer, "adamw");
  EXPECT_EQ(r.optimizer_impl, "fused");
  EXPECT_TRUE(r.fsdp);
  EXPECT_EQ(r.dp, 8);
  EXPECT_EQ(r.world, 8);
  EXPECT_EQ(r.tp, 1);
  EXPECT_EQ(r.master_weights, "fp32");
  EXPECT_EQ(r.fsdp_wrap, "torchtitan");  // v0.2's units: the embedding, each block, [norm, output], the root
  EXPECT_EQ(r.reshard_after_forward, "default");
  EXPECT_EQ(r.kernels, "cuda");  // torchtitan trains on CUDA: its flash attention's contract
  EXPECT_TRUE(r.fp8.empty());  // [quantize.linear.float8] without the converter in model.converters
  EXPECT_EQ(step_command_line(r),
            "census step llama-3.1-8b --seq-length 8192 --recompute torchtitan-op --optimizer-impl fused --kernels cuda "
            "--dp 8 --fsdp --world 8 --fsdp-wrap torchtitan --master-weights fp32");
  EXPECT_TRUE(ignored(file, "training.max_norm"));
  EXPECT_TRUE(ignored(file, "quantize.linear.float8.filter_fqns"));
  EXPECT_TRUE(ignored(file, "checkpoint.async_mode"));
  EXPECT_TRUE(ignored(file, "validation.freq"));  // validation.enable = false
  EXPECT_EQ(file.notes.size(), 1u);               // Transformers' modeling
}

// v0.1's file: the same run, but v0.1 reshards every block but the last (Census's default units).
TEST(TorchtitanToml, Llama3_8bOfV01) {
  const TrainerFile file = read_shipped("v0.1.0-llama3_8b.toml", 64);
  EXPECT_EQ(file.format, "torchtitan's TOML job config, v0.1");
  EXPECT_EQ(file.run.dp, 64);
  EXPECT_EQ(file.run.reshard_after_forward, "default");
  EXPECT_TRUE(ignored(file, "float8.filter_fqns"));
  EXPECT_EQ(file.notes.size(), 1u);
}

// The 70B preset (64 GPUs): TP 8 with torchtitan's plan (SequenceParallel norms, loss parallel), FSDP2 over
// the 8 GPUs left, full checkpointing, 8 sequences a rank. On 8 GPUs there is no FSDP2, and torchtitan
// trains its fp32 model in fp32 under TP without it, which is refused.
TEST(TorchtitanToml, Llama3_70bOfV02) {
  const TrainerFile file = read_shipped("v0.2.0-llama3_70b.toml", 64);
  const census::Run& r = file.run;
  EXPECT_EQ(r.model, "llama-3.1-70b");
  EXPECT_EQ(r.tp, 8);
  EXPECT_EQ(r.dp, 8);
  EXPECT_TRUE(r.sequence_parallel);
  EXPECT_TRUE(r.loss_parallel);
  EXPECT_EQ(r.recompute, "full");
  EXPECT_EQ(r.micro_batch_size, 8);
  EXPECT_TRUE(r.fsdp_wrap.empty());  // beside TP, the layers' units, every block resharded (a note says so)
  EXPECT_EQ(r.reshard_after_forward, "true");
  EXPECT_EQ(file.notes.size(), 2u);
  auto alone = read_trainer_file("torchtitan", kData + "v0.2.0-llama3_70b.toml", {8, false});
  ASSERT_FALSE(alone.ok());
  EXPECT_NE(alone.refusal().message().find("training.dtype"), std::string::npos) << alone.refusal().message();
}

TEST(TorchtitanToml, Qwen3_32bOfV02) {
  const TrainerFile file = read_shipped("v0.2.0-qwen3_32b.toml", 8);
  EXPECT_EQ(file.run.model, "qwen3-32b");
  EXPECT_EQ(file.run.micro_batch_size, 2);
  EXPECT_EQ(file.run.seq_length, 4096);
  EXPECT_EQ(file.run.recompute, "full");
}

// torchtitan's defaults where the file is silent: selective per-layer checkpointing every 2nd block, 8 x 2,048.
TEST(TorchtitanToml, DefaultsAreTorchtitans) {
  const auto file = read_text(kModel);
  ASSERT_TRUE(file.ok()) << file.refusal().message();
  EXPECT_EQ(file->run.recompute, "torchtitan-layer:2");
  EXPECT_EQ(file->run.seq_length, 2048);
  EXPECT_EQ(file->run.micro_batch_size, 8);
  EXPECT_EQ(file->run.optimizer_impl, "fused");
  EXPECT_TRUE(file->ignored.empty());
}

TEST(TorchtitanToml, EachFieldThatMovesMemory) {
  auto run = [](const std::string& extra, int64_t world = 8) {
    auto file = read_text(kModel + extra, world);
    EXPECT_TRUE(file.ok()) << extra << ": " << (file.ok() ? "" : file.refusal().message());
    return file.ok() ? file->run : census::Run{};
  };
  EXPECT_EQ(run("[activation_checkpoint]\nmode = \"none\"\n").recompute, "none");
  EXPECT_EQ(run("[activation_checkpoint]\nmode = \"full\"\n").recompute, "full");
  EXPECT_EQ(run("[activation_checkpoint]\nselective_ac_option = \"3\"\n").recompute, "torchtitan-layer:3");
  EXPECT_EQ(run("[optimizer]\nimplementation = \"foreach\"\n").optimizer_impl, "foreach");
  EXPECT_TRUE(run("[optimizer]\nearly_step_in_backward = true\n").optimizer_in_backward);
  // global_batch_size 64 over 8 ranks of local_batch_size 2: 4 micro-batches accumulated.
  const census::Run accumulated = run("[training]\nlocal_batch_size = 2\nglobal_batch_size = 64\n");
  EXPECT_EQ(accumulated.micro_batches, 4);
  EXPECT_EQ(accumulated.micro_batch_size, 2);
  EXPECT_TRUE(run("[training]\nenable_cpu_offload = true\n").cpu_offload);
  EXPECT_EQ(run("[parallelism]\nfsdp_reshard_after_forward = \"never\"\n").reshard_after_forward, "false");
  EXPECT_EQ(run("[parallelism]\nfsdp_reshard_after_forward = \"always\"\n").reshard_after_forward, "true");
  EXPECT_TRUE(run("[training]\nenable_cpu_offload = true\n").fsdp_wrap.empty());
  const census::Run tp = run("[parallelism]\ntensor_parallel_degree = 2\ndisable_loss_parallel = true\n");
  EXPECT_EQ(tp.tp, 2);
  EXPECT_EQ(tp.dp, 4);
  EXPECT_TRUE(tp.sequence_parallel);
  EXPECT_FALSE(tp.loss_parallel);
  // One GPU of a bf16 model: no FSDP2, bf16 weights, as Census's plain step.
  const census::Run one = run("[training]\ndtype = \"bfloat16\"\n", 1);
  EXPECT_FALSE(one.fsdp);
  EXPECT_EQ(one.master_weights, "bf16");
  // torchao's Float8Linear, v0.2's converter and section, then v0.1's.
  const census::Run f8 = run(
      "converters = [\"quantize.linear.float8\"]\n[quantize.linear.float8]\nrecipe_name = \"rowwise_with_gw_hp\"\n"
      "filter_fqns = [\"output\"]\n");
  EXPECT_EQ(f8.fp8, "rowwise-gw-hp");
  EXPECT_TRUE(f8.fp8_skip_head);
  const census::Run f8v01 = run("converters = [\"float8\"]\n[float8]\nfilter_fqns = []\n");
  EXPECT_EQ(f8v01.fp8, "tensorwise");
  EXPECT_FALSE(f8v01.fp8_skip_head);
}

TEST(TorchtitanToml, RefusesWhatItDoesNotPrice) {
  expect_refused("[model]\nname = \"llama3\"\nflavor = \"405B\"\n", "job.toml: model.flavor");
  expect_refused(kModel, "data_parallel_shard_degree", 0);  // -1 without --world
  expect_refused(kModel + "[parallelism]\ntensor_parallel_degree = 3\n", "--world 8");
  expect_refused(kModel + "[parallelism]\npipeline_parallel_degree = 2\n", "job.toml: parallelism.pipeline_parallel_degree");
  expect_refused(kModel + "[parallelism]\ncontext_parallel_degree = 2\n", "parallelism.context_parallel_degree");
  expect_refused(kModel + "[parallelism]\nexpert_parallel_degree = 2\n", "parallelism.expert_parallel_degree");
  expect_refused(kModel + "[parallelism]\ndata_parallel_replicate_degree = 2\n", "data_parallel_replicate_degree");
  expect_refused(kModel + "[parallelism]\ndata_parallel_shard_degree = 0\n", "data_parallel_shard_degree");
  expect_refused(kModel + "[parallelism]\nenable_async_tensor_parallel = true\n", "enable_async_tensor_parallel");
  expect_refused(kModel + "[compile]\nenable = true\n", "job.toml: compile.enable");
  expect_refused(kModel + "[training]\ncompile = true\n", "job.toml: training.compile");
  expect_refused(kModel + "[training]\nglobal_batch_size = 12\n", "training.global_batch_size");
  expect_refused(kModel + "[training]\nmixed_precision_param = \"float32\"\n", "training.mixed_precision_param");
  expect_refused(kModel + "[training]\ndtype = \"bfloat16\"\n", "training.dtype");  // bf16 shards, fp32 reduce
  expect_refused(kModel, "training.dtype", 1);  // one GPU: autocast over the fp32 model
  expect_refused(kModel + "[optimizer]\nname = \"Adam\"\n", "optimizer.name");
  expect_refused(kModel + "[activation_checkpoint]\nmode = \"memory_budget\"\n", "activation_checkpoint.mode");
  expect_refused(kModel + "[activation_checkpoint]\nselective_ac_option = \"0\"\n", "selective_ac_option");
  expect_refused(kModel + "[validation]\nenable = true\n", "validation.enable");
  expect_refused(kModel + "[fault_tolerance]\nenable = true\n", "fault_tolerance.enable");
  expect_refused(kModel + "[experimental]\ncustom_import = \"my.module\"\n", "experimental.custom_import");
  expect_refused("[model]\nname = \"llama3\"\nflavor = \"8B\"\nconverters = [\"quantize.linear.mx\"]\n", "model.converters");
  expect_refused("[model]\nname = \"llama3\"\nflavor = \"8B\"\nconverters = [\"float8\"]\n[float8]\nemulate = true\n",
                 "float8.emulate");
  expect_refused("[model]\nname = \"llama3\"\nflavor = \"8B\"\nconverters = [\"float8\"]\n[float8]\nfilter_fqns = [\"layers.0\"]\n",
                 "float8.filter_fqns");
}

TEST(TorchtitanToml, RefusesWhatTorchtitanDoesNotHave) {
  expect_refused(kModel + "[trainer]\nsteps = 1\n", "job.toml: [trainer]: is not a section");
  expect_refused(kModel + "[training]\nbatch_sizes = 1\n", "job.toml: 'training.batch_sizes': is not a field of torchtitan's [training]");
  expect_refused(kModel + "seq_len = 1\n", "job.toml: 'model.seq_len'");
  expect_refused(kModel + "[training]\nseq_len = \"8192\"\n", "job.toml: training.seq_len: must be an integer");
  expect_refused(kModel + "[training]\nmax_norm = true\n", "training.max_norm: must be a number");
  expect_refused("[model\nname = \"llama3\"\n", "job.toml:1:");  // not TOML
  expect_refused(kModel + "[[training]]\nseq_len = 1\n", "job.toml");  // an array of tables
}

TEST(TrainerFile, RefusesAnUnknownTrainerOrFile) {
  auto trainer = read_trainer_file("megatron-lm", kData + "v0.2.0-llama3_8b.toml", {8, false});
  ASSERT_FALSE(trainer.ok());
  EXPECT_NE(trainer.refusal().message().find("--from 'megatron-lm'"), std::string::npos) << trainer.refusal().message();
  auto missing = read_trainer_file("torchtitan", kData + "no_such_job.toml", {8, false});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.refusal().message().find("no_such_job.toml"), std::string::npos);
}

// The step's own config argument names the model: the file's model name is then not mapped.
TEST(TrainerFile, TheStepsConfigNamesAModelCensusDoesNotShip) {
  auto file = read_torchtitan_toml("[model]\nname = \"llama3\"\nflavor = \"405B\"\n", "job.toml", {8, true});
  ASSERT_TRUE(file.ok()) << file.refusal().message();
  EXPECT_TRUE(file->run.model.empty());
}

// Ignored fields, one line a reason, in the order first met.
TEST(TrainerFile, IgnoredLinesGroupByReason) {
  const std::vector<std::string> lines =
      ignored_lines({{"a.x", "they move no memory"}, {"b.y", "they act between steps"}, {"a.z", "they move no memory"}});
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "ignored, they move no memory: a.x, a.z");
  EXPECT_EQ(lines[1], "ignored, they act between steps: b.y");
}

}  // namespace
}  // namespace census
