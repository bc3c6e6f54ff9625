// The layouts the planner tries and names (plan/plan_layout.h): the splits it balances, as Megatron
// would for DeepSeek-V3's 61 layers and Qwen3-235B-A22B's 94, and --layout's reading of a layout.
#include <gtest/gtest.h>

#include "cli/request.h"
#include "plan/plan_layout.h"

namespace census {
namespace {

ModelConfig shipped(const std::string& name) {
  auto model = cli::resolve_model(name);
  if (!model) throw std::runtime_error(model.refusal().message());
  return model.take();
}

// 61 layers: 16 stages of 1F1B take 3 first and 2 last (the middle 14 take 4 each; with the embedding
// and the loss each a unit, stages of 4, 4 and 3 units), 8 stages 7 and 6 (8, 8, 7 units). 61 + 2 = 63
// units do not split over 8 or 16, and an odd 61 never over chunks of 2 layers (no V = 2 split).
TEST(PlanLayout, BalancedSplitsOfDeepSeekV3) {
  auto split = [](int64_t stages, int64_t chunks) { return balanced_splits(61, stages, chunks); };
  ASSERT_EQ(split(16, 1).size(), 1u);
  EXPECT_EQ(split(16, 1)[0], (PipelineSplit{3, 2, false, false}));
  EXPECT_EQ(split(8, 1)[0], (PipelineSplit{7, 6, false, false}));
  EXPECT_TRUE(split(8, 2).empty());
  // 63 units over 7 stages (9 each): the embedding and the loss as layers, not the first/last split.
  EXPECT_EQ(split(7, 1)[0], (PipelineSplit{0, 0, true, true}));
}

// 94 layers over 8 stages of 4 chunks: 96 units, 3 a chunk (Megatron's recipe for Qwen3-235B-A22B); over
// 2 stages, 47 each is even (and with the embedding and the loss, the same split again).
TEST(PlanLayout, BalancedSplitsOfQwen3) {
  EXPECT_EQ(balanced_splits(94, 8, 4), (std::vector<PipelineSplit>{{0, 0, true, true}}));
  EXPECT_EQ(balanced_splits(94, 2, 1), (std::vector<PipelineSplit>{{}}));
  // 80 layers over 8: even, and the embedding and loss as layers does not divide 82.
  EXPECT_EQ(balanced_splits(80, 8, 1), (std::vector<PipelineSplit>{{}}));
}

// "tp=2,ep=32,pp=8,vpp=4,mbs=1,recompute=selective" on 256 devices: DP 256 / (2 x 8) = 16, the
// interleaved schedule (V 4), 94 layers split with the embedding and loss as layers, M = 256 / 16.
TEST(PlanLayout, ReadsTheNamedLayout) {
  const ModelConfig c = shipped("qwen3-235b-a22b");
  RunShape run;
  run.gpus = 256;
  run.global_batch = 256;
  auto l = parse_layout(c, run, "tp=2,ep=32,pp=8,vpp=4,mbs=1,recompute=selective");
  ASSERT_TRUE(l.ok()) << l.refusal().message();
  EXPECT_EQ(l->dp, 16);
  EXPECT_EQ(l->ep, 32);
  EXPECT_EQ(l->schedule, PipelineSchedule::kInterleaved);
  EXPECT_EQ(l->virtual_stages, 4);
  EXPECT_EQ(l->split, (PipelineSplit{0, 0, true, true}));
  EXPECT_EQ(l->micro_batches, 16);
  EXPECT_EQ(l->recompute.all, Recompute::kSelective);
  EXPECT_EQ(schedule_label(*l), "interleaved V4");
  // A per-kind mode, the first and last stages' layers given.
  const ModelConfig v3 = shipped("deepseek-v3");
  run.gpus = 2048;
  run.global_batch = 15360;
  auto named = parse_layout(v3, run, "tp=2,pp=16,ep=64,first=3,last=2,recompute=selective,recompute.moe=full,zero=1");
  ASSERT_TRUE(named.ok()) << named.refusal().message();
  EXPECT_EQ(named->split, (PipelineSplit{3, 2, false, false}));
  EXPECT_EQ(recompute_text(named->recompute), "selective,moe=full");
  EXPECT_EQ(sharding_name(*named), "ZeRO-1");
}

// fsdp=1 is census step's FSDP2 over DP (--fsdp: fp32 shards under its mixed-precision policy where the
// run has fp32 master weights, nothing composed); sp=1 DTensor's plan with sequence parallelism and
// loss_parallel (--sequence-parallel --loss-parallel).
TEST(PlanLayout, FsdpAndSequenceParallelAreTheStepsOwn) {
  const ModelConfig c = shipped("llama-3.1-70b");
  RunShape run;
  run.gpus = 64;
  run.global_batch = 64;
  run.seq_length = 8192;
  run.fp32_master_weights = true;
  auto l = parse_layout(c, run, "tp=8,sp=1,pp=2,fsdp=1,recompute=selective");
  ASSERT_TRUE(l.ok()) << l.refusal().message();
  EXPECT_TRUE(l->fsdp);
  EXPECT_TRUE(l->sp);
  EXPECT_EQ(l->dp, 4);
  EXPECT_EQ(sharding_name(*l), "FSDP");
  EXPECT_EQ(tensor_parallel_name(*l), "8 SP");
  const StepOptions o = layout_step_options(*l, run, 1);
  EXPECT_EQ(o.fsdp.shards, 4);
  EXPECT_TRUE(o.fsdp.mixed_precision);
  EXPECT_EQ(o.composition.zero, 0);
  EXPECT_FALSE(o.composition.fp32_master_weights);
  EXPECT_TRUE(o.sequence_parallel);
  EXPECT_TRUE(o.loss_parallel);
  EXPECT_EQ(o.stage, 1);
  run.fp32_master_weights = false;
  auto bf16 = parse_layout(c, run, "fsdp=1");
  ASSERT_TRUE(bf16.ok()) << bf16.refusal().message();
  EXPECT_FALSE(layout_step_options(*bf16, run, 0).fsdp.mixed_precision);
  EXPECT_EQ(layout_step_options(*bf16, run, 0).fsdp.shards, 64);
}

// What census step refuses of FSDP2 and DTensor's plan, --layout refuses with the step's own reason.
TEST(PlanLayout, RefusesFsdpAndSequenceParallelWhereTheStepDoes) {
  const ModelConfig llama = shipped("llama-3.1-70b"), v3 = shipped("deepseek-v3");
  RunShape run;
  run.gpus = 64;
  run.global_batch = 64;
  run.seq_length = 8192;
  struct Case {
    const ModelConfig* config;
    const char* layout;
    const char* says;
  };
  const Case cases[] = {
      {&llama, "sp=1", "SP shards over TP > 1"},
      {&llama, "tp=8,dp=8,fsdp=1,zero=3", "FSDP shards by itself"},
      {&llama, "tp=8,pp=8,fsdp=1", "FSDP shards over DP > 1"},
      {&llama, "cp=2,fsdp=1", "--fsdp with --cp 2"},
      {&llama, "tp=2,cp=2,sp=1", "--sequence-parallel with --cp 2"},
      {&v3, "ep=8,fsdp=1", "--fsdp with --ep 8"},
      {&v3, "tp=2,sp=1", "--sequence-parallel / --loss-parallel on deepseek_v3"},
  };
  for (const Case& c : cases) {
    auto l = parse_layout(*c.config, run, c.layout);
    ASSERT_FALSE(l.ok()) << c.layout;
    EXPECT_NE(l.refusal().message().find(c.says), std::string::npos) << c.layout << ": " << l.refusal().message();
  }
  // The run's own options: fp32 gradients composed, the allocator (census plan --reserved).
  run.fp32_gradients = true;
  auto grads = parse_layout(llama, run, "fsdp=1");
  ASSERT_FALSE(grads.ok());
  EXPECT_NE(grads.refusal().message().find("--fsdp: its mixed-precision policy"), std::string::npos) << grads.refusal().message();
  run.fp32_gradients = false;
  // The allocator runs beside FSDP2 and DTensor's plan (their streams simulated): both are layouts.
  run.allocator = true;
  for (const char* layout : {"fsdp=1", "tp=2,sp=1"}) EXPECT_TRUE(parse_layout(llama, run, layout).ok()) << layout;
}

TEST(PlanLayout, RefusesWhatIsNotALayout) {
  const ModelConfig c = shipped("qwen3-235b-a22b");
  RunShape run;
  run.gpus = 256;
  run.global_batch = 256;
  for (const char* text : {"tp=2,ep=32,pp=8,vpp=4,sp=1", "tp=3", "tp=2,dp=2", "tp=2,pp=8,dp=8,cp=4", "ep=3",
                           "ep=256", "mbs=0", "mbs=3", "vpp=4", "fsdp=1,zero=2", "zero=1,dp=1,tp=8,pp=32", "first=3",
                           "pp=8,first=200", "tp=16", "recompute=partial", "recompute.attention=full", ""})
    EXPECT_FALSE(parse_layout(c, run, text).ok()) << text;
}

}  // namespace
}  // namespace census
