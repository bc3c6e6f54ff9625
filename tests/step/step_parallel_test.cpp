// Context and expert parallelism in census step, derived by hand on the step oracle's toys (hidden 256,
// 8 heads, 2 KV heads, head_dim 32, intermediate 512, vocab 4096, 4 layers; Qwen3-MoE: 8 experts, top-2,
// width 256), one micro-batch, no optimizer.
//
// CP: a rank of C runs S / C tokens of each sequence, so the Llama toy at 256 tokens under CP 2 simulates
// what the oracle's 128-token step holds (tests/data/step/llama_toy_L4_s128_single: F0 peaks at
// 19,558,544, B0 at 20,605,064, the step's peak, at aten._log_softmax_backward_data). The ring attention
// receives the other shard's K/V for the layer computing: (2 - 1) x 128 tokens x 2 (K and V) x 2 KV heads
// x 32 x 2 B = 32,768 B, present through every pass: F0 19,591,312, B0 20,637,832.
//
// EP: a Qwen3-MoE layer holds, at EP 1, its experts' gate_up_proj (8, 512, 256) = 1,048,576 and
// down_proj (8, 256, 256) = 524,288 parameters of its 1,739,328. At EP 2 the rank holds 4 of the 8:
// 524,288 + 262,144, the router (8 x 256) whole: 1,739,328 - 786,432 = 952,896 a layer, and the model
// 2 x 1,048,576 (embedding, head) + 256 (final norm) + 4 x 952,896 = 5,908,992 parameters. Its experts
// still run every token-expert pair of its 128 tokens (256 rows, those routed to the other rank's
// experts masked), so what a layer saves changes only by the groups' offsets both _grouped_mm keep, one
// (E) int32 tensor: 8 x 4 = 32 B at EP 1, 4 x 4 = 16 B at EP 2. The oracle's one-micro-batch step
// (tests/data/step/qwen3_moe_toy_L4_s128_single) leaves F0's graph 27,970,320 - 18,109,568 = 9,860,752 B
// above its start; at EP 2 it is 4 x 16 B less, 9,860,688, and at EP 4 (2 experts, 8 B) 4 x 24 B less.
#include <gtest/gtest.h>

#include "step/step_census.h"
#include "models/registry.h"
#include "step_cases.h"

namespace census {
namespace {

ModelConfig toy(const std::string& model_type, bool moe = false) {
  nlohmann::json json = {{"model_type", model_type}, {"hidden_size", 256}, {"num_attention_heads", 8},
                         {"num_key_value_heads", 2}, {"head_dim", 32},      {"intermediate_size", 512},
                         {"num_hidden_layers", 4},   {"vocab_size", 4096},  {"max_position_embeddings", 8192}};
  if (moe) {
    json["num_experts"] = 8;
    json["num_experts_per_tok"] = 2;
    json["moe_intermediate_size"] = 256;
  }
  auto config = read_config(json);
  if (!config) throw std::runtime_error(config.refusal().message());
  return config.take();
}

StepCensus run(const ModelConfig& config, const StepOptions& o) { return testing::step_or_throw(config, o); }

std::string refusal(const ModelConfig& config, const StepOptions& o) {
  auto step = census_step(config, o);
  return step ? std::string() : step.refusal().message();
}

TEST(StepContextParallel, TheRanksShareOfTheSequenceIsTheShorterStep) {
  StepOptions o;
  o.seq_length = 256;
  o.context_parallel = 2;
  const StepCensus s = run(toy("llama"), o);
  // Simulated: the oracle's 128-token step.
  EXPECT_EQ(s.analysis.peak.bytes, 20'605'064);
  EXPECT_EQ(s.analysis.peak.phase, "B0");
  EXPECT_EQ(s.analysis.peak.op, "aten._log_softmax_backward_data.default");
  EXPECT_EQ(s.analysis.phases[1].peak.bytes, 19'558'544);
  // Composed: the ring's K/V during every pass.
  EXPECT_EQ(s.composition.ring_kv_bytes, 32'768);
  EXPECT_EQ(s.composed.phases[1].name, "F0");
  EXPECT_EQ(s.composed.phases[1].peak.bytes, 19'558'544 + 32'768);
  EXPECT_EQ(s.composed_peak.bytes, 20'605'064 + 32'768);
  EXPECT_EQ(s.composed_peak.phase, "B0");
  EXPECT_EQ(s.composed.phases[3].name, "end");  // no pass: nothing received
  EXPECT_EQ(s.composed.phases[3].peak.bytes, s.analysis.phases[3].peak.bytes);
}

// CP 4 at 512 tokens: the same 128 tokens a rank, (4 - 1) x 128 x 2 x 2 x 32 x 2 = 98,304 B received.
// At TP 2 as well the rank holds one KV head: (4 - 1) x 128 x 2 x 1 x 32 x 2 = 49,152 B.
TEST(StepContextParallel, TheRingReceivesTheOtherShardsKeysAndValues) {
  StepOptions o;
  o.seq_length = 512;
  o.context_parallel = 4;
  const StepCensus s = run(toy("llama"), o);
  EXPECT_EQ(s.analysis.peak.bytes, 20'605'064);
  EXPECT_EQ(s.composed_peak.bytes, 20'605'064 + 98'304);
  o.tensor_parallel = 2;
  EXPECT_EQ(run(toy("llama"), o).composition.ring_kv_bytes, 49'152);
  // Two sequences a micro-batch: the ring receives each one's shards, (4 - 1) x 128 x 2 x 2 x 1 x 32 x 2.
  o.micro_batch_size = 2;
  EXPECT_EQ(run(toy("llama"), o).composition.ring_kv_bytes, 2 * 49'152);
}

// ZeRO shards over every rank holding the same parameters, the D data-parallel ranks and the C context-
// parallel ranks with them. The Llama toy at 256 tokens, CP 2, DP 2, ZeRO-1, 4 micro-batches then AdamW
// simulates the oracle's 128-token accumulated step (tests/data/step/llama_toy_L4_s128_accum_m4_adamw,
// worked in tests/step/step_compose_test.cpp): its states O = 17,310,876 and the update's temporaries
// 4,194,816 divide by 2 x 2 = 4, so the optimizer step falls to P + G + 4,327,719 + 128 + 1,048,704 =
// 22,687,271 and B1 peaks, at its simulated 29,260,424 plus the ring's 32,768.
TEST(StepContextParallel, ZeroShardsOverTheDataAndContextParallelRanks) {
  StepOptions o;
  o.seq_length = 256;
  o.context_parallel = 2;
  o.micro_batches = 4;
  o.optimizer = StepOptimizer::kAdamW;
  o.first_step = true;  // the first step, its for-loop AdamW, as the step oracle ran it
  o.optimizer_impl = nn::OptimizerImpl::kForLoop;
  o.composition.data_parallel = 2;
  o.composition.zero = 1;
  const StepCensus s = run(toy("llama"), o);
  EXPECT_EQ(s.analysis.peak.bytes, 38'816'540);  // the oracle's, at its optimizer step
  EXPECT_EQ(s.composed.phases[9].name, "optimizer_step");
  EXPECT_EQ(s.composed.phases[9].peak.bytes, 2 * 8'655'360 + 4'327'719 + 128 + 1'048'704);
  EXPECT_EQ(s.composed_peak.bytes, 29'260'424 + 32'768);
  EXPECT_EQ(s.composed_peak.phase, "B1");
  // DP 1: the context-parallel ranks alone.
  o.composition.data_parallel = 1;
  EXPECT_EQ(run(toy("llama"), o).composed.phases[9].peak.split.optimizer_states(), 17'310'876 / 2);
}

TEST(StepContextParallel, RefusesTokensItDoesNotDivide) {
  StepOptions o;
  o.seq_length = 130;
  o.context_parallel = 4;
  EXPECT_NE(refusal(toy("llama"), o).find("--cp 4"), std::string::npos);
  o.context_parallel = 0;
  EXPECT_NE(refusal(toy("llama"), o).find("--cp"), std::string::npos);
}

TEST(StepExpertParallel, TheRankHoldsItsShareOfTheExperts) {
  StepOptions o;
  o.seq_length = 128;
  o.optimizer = StepOptimizer::kAdamW;
  o.first_step = true;  // the first step, its for-loop AdamW, as the step oracle ran it
  o.optimizer_impl = nn::OptimizerImpl::kForLoop;
  o.expert_parallel = 2;
  const StepCensus s = run(toy("qwen3_moe", true), o);
  EXPECT_EQ(s.parameter_count, 2 * 1'048'576 + 256 + 4 * 952'896);
  EXPECT_EQ(s.parameter_tensors, 47);
  EXPECT_EQ(s.largest_layer_parameter_bytes, 2 * 952'896);
  // Every parameter's gradient, and AdamW's two bf16 moments and fp32 step of each tensor.
  EXPECT_EQ(s.gradient_bytes_after_last_backward, s.parameter_bytes);
  EXPECT_EQ(s.optimizer_state_bytes, 2 * s.parameter_bytes + 47 * 4);
}

TEST(StepExpertParallel, TheSavedBytesChangeOnlyByTheGroupsOffsets) {
  StepOptions o;
  o.seq_length = 128;
  auto graph = [&](int64_t ep) {
    o.expert_parallel = ep;
    const StepCensus s = run(toy("qwen3_moe", true), o);
    const StepPhase& f0 = s.analysis.phases[1];
    EXPECT_EQ(f0.name, "F0");
    return f0.live_at_end - f0.live_at_start;
  };
  EXPECT_EQ(graph(1), 9'860'752);
  EXPECT_EQ(graph(2), 9'860'752 - 4 * 16);
  EXPECT_EQ(graph(4), 9'860'752 - 4 * 24);
}

// Whole experts (expert TP 1, Megatron's expert_tensor_parallel_size 1) at TP 2, EP 2: a rank's 4 experts
// keep their width 256 where TP 2 would halve it to 128: gate_up_proj (4, 512, 256) and down_proj (4, 256,
// 256), 786,432 parameters a layer against (4, 256, 256) and (4, 256, 128), 393,216: 4 layers x 393,216
// more; the attention's heads halved either way.
TEST(StepExpertParallel, WholeExpertsKeepTheirWidthUnderTensorParallelism) {
  StepOptions o;
  o.seq_length = 128;
  o.tensor_parallel = 2;
  o.expert_parallel = 2;
  const int64_t split = run(toy("qwen3_moe", true), o).parameter_count;
  o.expert_tensor_parallel = 1;
  EXPECT_EQ(run(toy("qwen3_moe", true), o).parameter_count, split + 4 * 393'216);
  o.expert_tensor_parallel = 2;
  EXPECT_EQ(run(toy("qwen3_moe", true), o).parameter_count, split);
  o.expert_tensor_parallel = 3;
  EXPECT_NE(refusal(toy("qwen3_moe", true), o).find("--expert-tp"), std::string::npos);
  o.expert_tensor_parallel = 1;
  o.expert_parallel = 1;
  EXPECT_NE(refusal(toy("llama"), o).find("--expert-tp 1"), std::string::npos);
}

// GPT-OSS's experts (transposed, with biases, intermediate_size wide) shard under EP as the others do:
// an expert holds gate_up_proj 256 x 1024 and its bias 1024, down_proj 512 x 256 and its bias 256,
// 394,496 parameters; at EP 2 a layer holds 4 of its 8: 4 layers x 4 x 394,496 fewer.
TEST(StepExpertParallel, GptOssRanksHoldTheirShareOfTheExperts) {
  nlohmann::json json = {{"model_type", "gpt_oss"}, {"hidden_size", 256}, {"num_attention_heads", 8},
                         {"num_key_value_heads", 2}, {"head_dim", 32}, {"intermediate_size", 512},
                         {"num_hidden_layers", 4}, {"vocab_size", 4096}, {"num_local_experts", 8},
                         {"num_experts_per_tok", 2}, {"max_position_embeddings", 8192}};
  auto config = read_config(json);
  ASSERT_TRUE(config) << config.refusal().message();
  StepOptions o;
  o.seq_length = 128;
  const int64_t all = run(*config, o).parameter_count;
  o.expert_parallel = 2;
  EXPECT_EQ(run(*config, o).parameter_count, all - 4 * 4 * 394'496);
}

TEST(StepExpertParallel, RefusesExpertsItDoesNotDivideAndDenseModels) {
  StepOptions o;
  o.seq_length = 128;
  o.expert_parallel = 3;
  EXPECT_NE(refusal(toy("qwen3_moe", true), o).find("--ep 3"), std::string::npos);
  o.expert_parallel = 2;
  EXPECT_NE(refusal(toy("llama"), o).find("no experts"), std::string::npos);
}

}  // namespace
}  // namespace census
