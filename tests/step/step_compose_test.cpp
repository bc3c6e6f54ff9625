// The composed terms of census step, derived by hand on the Llama toy's accumulated step (hidden 256,
// 8 heads, 2 KV heads, head_dim 32, intermediate 512, vocab 4096, 4 layers, 128 tokens, 4 micro-batches,
// AdamW), whose simulated numbers equal the step oracle's (tests/data/step/llama_toy_L4_s128_accum_m4_adamw):
//
//   P = 8,655,360 parameter bytes (4,327,680 bf16 parameters in 39 tensors); a layer 557,568 parameters
//   G = 8,655,360 gradient bytes once the first backward is done
//   O = 17,310,876 AdamW state bytes = 2 P + 39 x 4 (the fp32 step scalars)
//   the simulated peak, 38,816,540 at optimizer_step = P + G + O + 128 (rotary buffers)
//     + 4,194,816 (lm_head's sqrt and quotient, 2 x 2,097,152, and the final norm's denom, 512)
//   B1's peak, 29,260,424 = P + G + 11,949,704 other (the loss's three fp32 [128, 4096] and the saves)
//   F1's peak, 28,213,904 = P + G + 10,903,184 other
// And the tensor-parallel shards of a Llama layer and of a Qwen3-MoE layer, counted by hand.
#include <gtest/gtest.h>

#include "step/step_census.h"
#include "models/registry.h"

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

StepOptions accumulated_adamw() {
  StepOptions o;
  o.seq_length = 128;
  o.micro_batches = 4;
  o.optimizer = StepOptimizer::kAdamW;
  o.first_step = true;  // the first step, its for-loop AdamW, as the step oracle ran it
  o.optimizer_impl = nn::OptimizerImpl::kForLoop;
  return o;
}

constexpr int64_t kP = 8'655'360, kG = 8'655'360, kO = 17'310'876;
constexpr int64_t kOptimizerTemporaries = 4'194'816, kBuffers = 128;

StepCensus run(const StepOptions& o, const ModelConfig& config = toy("llama")) {
  auto step = census_step(config, o);
  if (!step) throw std::runtime_error(step.refusal().message());
  return step.take();
}

TEST(StepCompose, TheSimulatedStepItStandsOn) {
  const StepCensus s = run(accumulated_adamw());
  EXPECT_EQ(s.analysis.peak.bytes, kP + kG + kO + kBuffers + kOptimizerTemporaries);
  EXPECT_EQ(s.largest_layer_parameter_bytes, 2 * 557'568);
  EXPECT_EQ(s.composed_peak.bytes, 0);  // no composition asked: nothing reweighed
  EXPECT_TRUE(s.composed.phases.empty());
}

// ZeRO-1 over 4 ranks: O / 4 = 4,327,719 (every state storage's bytes divide by 4) and the update's
// temporaries / 4 = 1,048,704: the optimizer step falls to P + G + 4,327,719 + 128 + 1,048,704 =
// 22,687,271, below B1's unchanged 29,260,424, which becomes the peak.
TEST(StepCompose, ZeroOneShardsTheOptimizerStatesAndMovesThePeakToTheBackward) {
  StepOptions o = accumulated_adamw();
  o.composition.data_parallel = 4;
  o.composition.zero = 1;
  const StepCensus s = run(o);
  EXPECT_EQ(s.composed_peak.bytes, 29'260'424);
  EXPECT_EQ(s.composed_peak.phase, "B1");
  EXPECT_EQ(s.composed.phases[9].name, "optimizer_step");
  EXPECT_EQ(s.composed.phases[9].peak.bytes, kP + kG + kO / 4 + kBuffers + kOptimizerTemporaries / 4);
  EXPECT_EQ(s.composed.phases[9].peak.split.optimizer_states(), 4'327'719);
}

// ZeRO-2: and G / 4 = 2,163,840. B1: P + G/4 + 11,949,704 = 22,768,904.
TEST(StepCompose, ZeroTwoShardsTheGradientsToo) {
  StepOptions o = accumulated_adamw();
  o.composition.data_parallel = 4;
  o.composition.zero = 2;
  const StepCensus s = run(o);
  EXPECT_EQ(s.composed_peak.bytes, kP + kG / 4 + 11'949'704);
  EXPECT_EQ(s.composed_peak.phase, "B1");
  EXPECT_EQ(s.composed_peak.split.gradients(), 2'163'840);
}

// ZeRO-3: and P / 4, plus the gathered layer and the prefetched one during every pass:
// 2 x 1,115,136 = 2,230,272. B1: P/4 + G/4 + 11,949,704 + 2,230,272 = 18,507,656.
TEST(StepCompose, ZeroThreeShardsTheParametersAndGathersTwoLayers) {
  StepOptions o = accumulated_adamw();
  o.composition.data_parallel = 4;
  o.composition.zero = 3;
  const StepCensus s = run(o);
  EXPECT_EQ(s.composed_peak.bytes, kP / 4 + kG / 4 + 11'949'704 + 2 * 1'115'136);
  EXPECT_EQ(s.composed_peak.phase, "B1");
  EXPECT_EQ(s.composed_peak.split.parameters(), 2'163'840);
  // No pass runs in the optimizer step: nothing gathered there.
  EXPECT_EQ(s.composed.phases[9].peak.bytes, kP / 4 + kG / 4 + kO / 4 + kBuffers + kOptimizerTemporaries / 4);
}

// fp32 master weights: states x 3 (12 B per parameter for the bf16 moments' 4) and the update's
// temporaries x 2: P + G + 3 O + 128 + 2 x 4,194,816 = 77,633,108, at the optimizer step.
TEST(StepCompose, Fp32MasterWeightsTripleTheStatesAndDoubleTheUpdate) {
  StepOptions o = accumulated_adamw();
  o.composition.fp32_master_weights = true;
  const StepCensus s = run(o);
  EXPECT_EQ(s.composed_peak.bytes, kP + kG + 3 * kO + kBuffers + 2 * kOptimizerTemporaries);
  EXPECT_EQ(s.composed_peak.phase, "optimizer_step");
}

// fp32 gradients (main_grad): G x 2, at the optimizer step: 38,816,540 + 8,655,360 = 47,471,900.
TEST(StepCompose, Fp32GradientsDoubleTheGradients) {
  StepOptions o = accumulated_adamw();
  o.composition.fp32_gradients = true;
  const StepCensus s = run(o);
  EXPECT_EQ(s.composed_peak.bytes, 38'816'540 + kG);
  EXPECT_EQ(s.composed.phases[4].name, "B1");
  EXPECT_EQ(s.composed.phases[4].peak.bytes, 29'260'424 + kG);
}

TEST(StepCompose, OverheadsAreTheirOwnTerms) {
  StepComposition c;
  c.cuda_context = 500;
  c.nccl_buffers = 70;
  c.fragmentation = 3;
  EXPECT_EQ(overhead_bytes(c), 573);
  const std::vector<ComposedTerm> terms = composed_terms(c, StepMoment{});
  ASSERT_EQ(terms.size(), 7u);
  EXPECT_EQ(terms[4].name, "cuda_context");
  EXPECT_EQ(terms[4].bytes, 500);
  EXPECT_EQ(terms[5].name, "nccl_buffers");
  EXPECT_EQ(terms[6].name, "fragmentation");
}

// A Llama layer at TP 2: q 256x128, k and v 256x32 (one KV head), o 128x256, gate, up and down
// 256x256 (512 / 2), the two norms whole (256 each): 279,040 parameters. The embedding, the final norm
// and the head stay whole: 1,048,576 + 4 x 279,040 + 256 + 1,048,576 = 3,213,568.
TEST(StepCompose, TensorParallelLlamaLayersAsTheRankBuildsThem) {
  StepOptions o;
  o.seq_length = 128;
  o.tensor_parallel = 2;
  const StepCensus s = run(o);
  EXPECT_EQ(s.parameter_count, 1'048'576 + 4 * 279'040 + 256 + 1'048'576);
  EXPECT_EQ(s.largest_layer_parameter_bytes, 2 * 279'040);
}

// A Qwen3-MoE layer: q 256x256, k and v 256x64, o 256x256, q_norm and k_norm 32 each, the router
// 8x256, the experts' gate_up (8, 512, 256) and down (8, 256, 256), the two norms: 1,739,328 (the
// oracle's 9,054,720 = 2 x 1,048,576 + 256 + 4 x 1,739,328). At TP 2 the projections halve, the
// experts' width halves (256 -> 128, all 8 experts kept), the router and the norms stay whole:
// 32,768 + 2 x 8,192 + 32,768 + 64 + 2,048 + 524,288 + 262,144 + 512 = 870,976.
TEST(StepCompose, TensorParallelMoeLayersAsTheRankBuildsThem) {
  StepOptions o;
  o.seq_length = 128;
  const ModelConfig moe = toy("qwen3_moe", /*moe=*/true);
  EXPECT_EQ(run(o, moe).parameter_count, 2 * 1'048'576 + 256 + 4 * 1'739'328);
  o.tensor_parallel = 2;
  EXPECT_EQ(run(o, moe).parameter_count, 2 * 1'048'576 + 256 + 4 * 870'976);
}

// GPipe runs every forward, then every backward: the last of 2 stages holds 4 graphs before B0. Each
// forward leaves the same graph live (F0's end minus its start), so F3 ends 4 graphs above the start.
TEST(StepCompose, GpipeHoldsEveryMicroBatchsGraph) {
  StepOptions o;
  o.seq_length = 128;
  o.micro_batches = 4;
  o.pipeline_stages = 2;
  o.stage = 1;
  o.schedule = PipelineSchedule::kGPipe;
  o.optimizer = StepOptimizer::kNone;
  const StepCensus s = run(o);
  EXPECT_EQ(s.schedule, (std::vector<std::string>{"F0", "F1", "F2", "F3", "B0", "B1", "B2", "B3"}));
  const StepPhase& f0 = s.analysis.phases[1];
  const StepPhase& f3 = s.analysis.phases[4];
  EXPECT_EQ(f3.live_at_end - f0.live_at_start, 4 * (f0.live_at_end - f0.live_at_start));
}

TEST(StepCompose, OneFOneBOrders) {
  auto names = [](const std::vector<StepPass>& order) {
    std::string text;
    for (const StepPass& p : order) text += std::string(1, p.pass) + std::to_string(p.micro_batch) + " ";
    return text;
  };
  EXPECT_EQ(names(pipeline_order(PipelineSchedule::k1F1B, 4, 0, 4)), "F0 F1 F2 F3 B0 B1 B2 B3 ");
  EXPECT_EQ(names(pipeline_order(PipelineSchedule::k1F1B, 4, 1, 4)), "F0 F1 F2 B0 F3 B1 B2 B3 ");
  EXPECT_EQ(names(pipeline_order(PipelineSchedule::k1F1B, 4, 3, 4)), "F0 B0 F1 B1 F2 B2 F3 B3 ");
  // Fewer micro-batches than the warm-up: every forward first.
  EXPECT_EQ(names(pipeline_order(PipelineSchedule::k1F1B, 4, 0, 2)), "F0 F1 B0 B1 ");
}

// Megatron's interleaved order for stage 0 of 2 with 2 chunks and 4 micro-batches, by its formula:
// 8 virtual micro-batches; warm-up 2 (2 - 0 - 1) + (2 - 1) 2 = 4 forwards; virtual k is micro-batch
// (k / 4) 2 + k % 2 through chunk (k % 4) / 2 (a backward's from the last).
TEST(StepCompose, InterleavedOrderAsMegatronRunsIt) {
  auto names = [](const std::vector<StepPass>& order) {
    std::string text;
    for (const StepPass& p : order)
      text += std::string(1, p.pass) + std::to_string(p.micro_batch) + "." + std::to_string(p.chunk) + " ";
    return text;
  };
  EXPECT_EQ(names(pipeline_order(PipelineSchedule::kInterleaved, 2, 0, 4, 2)),
            "F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 B2.1 B3.1 B2.0 B3.0 ");
  // The last stage's warm-up is (V - 1) P = 2: its last chunk's backward follows its forward.
  EXPECT_EQ(names(pipeline_order(PipelineSchedule::kInterleaved, 2, 1, 4, 2)),
            "F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 B2.1 F3.1 B3.1 B2.0 B3.0 ");
  // M = P: every forward first.
  EXPECT_EQ(names(pipeline_order(PipelineSchedule::kInterleaved, 2, 1, 2, 2)), "F0.0 F1.0 F0.1 F1.1 B0.1 B1.1 B0.0 B1.0 ");
}

// With 2 chunks a stage of 2, stage 1 holds layers 1 and 3 (chunk v the (2 v + 1)-th layer), the final
// norm and the head: 2 x 557,568 + 256 + 1,048,576 parameters; stage 0 the embedding and layers 0
// and 2. Every parameter has its gradient after the last backward.
TEST(StepCompose, InterleavedStagesHoldTheirChunks) {
  StepOptions o;
  o.seq_length = 128;
  o.micro_batches = 4;
  o.pipeline_stages = 2;
  o.virtual_stages = 2;
  o.schedule = PipelineSchedule::kInterleaved;
  o.stage = 1;
  const StepCensus last = run(o);
  EXPECT_EQ(last.parameter_count, 2 * 557'568 + 256 + 1'048'576);
  EXPECT_EQ(last.gradient_bytes_after_last_backward, last.parameter_bytes);
  EXPECT_EQ(last.schedule.front(), "F0.0");
  EXPECT_EQ(last.buffer_bytes, 2 * 128);  // each chunk's rotary module
  o.stage = 0;
  const StepCensus first = run(o);
  EXPECT_EQ(first.parameter_count, 1'048'576 + 2 * 557'568);
  EXPECT_EQ(first.gradient_bytes_after_last_backward, first.parameter_bytes);
}

// A planner reads each composition's highest phase peak from one walk of the log for all of them
// (StepBytes::highest_phase_peaks, StepOptions::also_composed_only): the same moment, its bytes, phase,
// op, event and split, as the step's own analysis under that composition finds, on a pipeline stage
// whose later passes are replays, under ZeRO 1 to 3 with fp32 master weights and gradients (ZeRO-3's
// gathered layers added during every pass) and under context parallelism's ring.
TEST(StepCompose, EachCompositionsPeakFromOneWalkIsItsAnalysis) {
  StepOptions o = accumulated_adamw();
  o.pipeline_stages = 2;
  o.micro_batches = 8;
  for (const int64_t cp : {int64_t{1}, int64_t{2}}) {
    std::vector<StepComposition> compositions;
    for (int zero : {0, 1, 2, 3}) {
      StepComposition c;
      c.data_parallel = 4;
      c.zero = zero;
      c.fp32_master_weights = c.fp32_gradients = zero > 0;
      compositions.push_back(c);
    }
    for (int64_t stage : {0, 1}) {
      StepOptions planned = o;
      planned.stage = stage;
      planned.seq_length = 128 * cp;
      planned.context_parallel = cp;
      planned.also_composed = compositions;
      planned.also_composed_only = true;
      const StepCensus all = run(planned);
      ASSERT_EQ(all.also_composed_peaks.size(), compositions.size());
      for (size_t i = 0; i < compositions.size(); ++i) {
        StepOptions one = planned;
        one.also_composed.clear();
        one.also_composed_only = false;
        one.composition = compositions[i];
        const StepCensus each = run(one);
        const StepMoment& want = compositions[i].composes() || cp > 1 ? each.composed_peak : each.analysis.peak;
        const StepMoment& got = all.also_composed_peaks[i];
        EXPECT_EQ(got.bytes, want.bytes) << "stage " << stage << " composition " << i << " cp " << cp;
        EXPECT_EQ(got.phase, want.phase) << i;
        EXPECT_EQ(got.op, want.op) << i;
        EXPECT_EQ(got.event, want.event) << i;
        for (size_t c = 0; c < got.split.bytes.size(); ++c) EXPECT_EQ(got.split.bytes[c], want.split.bytes[c]) << i;
      }
    }
  }
}

}  // namespace
}  // namespace census
