// A schedule's time from its own order (plan/plan_pipeline.h): the bubbles the schedules are known for,
// derived on uniform stages, a send between stages on the critical path, and the extension of a long
// step from two shorter ones held to the whole simulation.
#include <gtest/gtest.h>

#include <random>

#include "plan/plan_pipeline.h"

namespace census {
namespace {

PipelineTimes uniform(int64_t stages, int64_t chunks, double forward, double backward) {
  PipelineTimes t;
  t.forward.assign(static_cast<size_t>(stages), std::vector<double>(static_cast<size_t>(chunks), forward));
  t.backward.assign(static_cast<size_t>(stages), std::vector<double>(static_cast<size_t>(chunks), backward));
  return t;
}

// 1F1B and GPipe over P = 4 stages, M = 8 micro-batches of forward 1 and backward 2: the last stage
// starts P - 1 forwards late and the first ends P - 1 backwards late, (M + P - 1)(f + b) = 11 x 3 = 33,
// each stage busy M (f + b) = 24: a bubble of (P - 1)(f + b) = 9.
TEST(PlanPipeline, OneForwardOneBackwardBubble) {
  for (PipelineSchedule s : {PipelineSchedule::k1F1B, PipelineSchedule::kGPipe}) {
    const PipelineRun run = simulate_pipeline_whole(s, 4, 8, 1, uniform(4, 1, 1, 2));
    EXPECT_DOUBLE_EQ(run.makespan, 33);
    EXPECT_DOUBLE_EQ(run.busy[0], 24);
    EXPECT_DOUBLE_EQ(run.bubble(), 9);
  }
}

// Interleaved over V = 2 chunks of forward 1 and backward 2 each: a stage's micro-batch takes V (f + b)
// = 6, and the bubble is (P - 1)/V of that, (P - 1)(f + b) = 9 against 1F1B's (P - 1) x 6 = 18 for the
// same stage's work (Megatron's (P - 1)/V bubble).
TEST(PlanPipeline, InterleavedBubbleIsAVth) {
  const PipelineRun run = simulate_pipeline_whole(PipelineSchedule::kInterleaved, 4, 8, 2, uniform(4, 2, 1, 2));
  EXPECT_DOUBLE_EQ(run.busy[0], 48);
  EXPECT_DOUBLE_EQ(run.bubble(), 9);
  const PipelineRun plain = simulate_pipeline_whole(PipelineSchedule::k1F1B, 4, 8, 1, uniform(4, 1, 2, 4));
  EXPECT_DOUBLE_EQ(plain.bubble(), 18);
}

// Two stages, one micro-batch, passes of 1 and sends of 0.5: F on stage 0 [0, 1], F on stage 1
// [1.5, 2.5], B on stage 1 [2.5, 3.5], B on stage 0 [4, 5].
TEST(PlanPipeline, SendsLieOnTheCriticalPath) {
  PipelineTimes t = uniform(2, 1, 1, 1);
  t.transfer = 0.5;
  EXPECT_DOUBLE_EQ(simulate_pipeline_whole(PipelineSchedule::k1F1B, 2, 1, 1, t).makespan, 5);
}

// No pipeline: every pass one after the other.
TEST(PlanPipeline, OneStageHasNoBubble) {
  const PipelineRun run = simulate_pipeline(PipelineSchedule::k1F1B, 1, 1000, 1, uniform(1, 1, 1, 2));
  EXPECT_DOUBLE_EQ(run.makespan, 3000);
  EXPECT_DOUBLE_EQ(run.bubble(), 0);
}

// A step of up to 2^17 passes is the whole simulation; a longer one is extended from its last groups of
// P micro-batches the budget allows: within 0.1 % of the whole simulation, for uneven stages and chunks,
// sends, each schedule.
TEST(PlanPipeline, LongStepsExtendTheSimulation) {
  std::mt19937 random(7);
  std::uniform_real_distribution<double> duration(0.5, 3.0);
  for (int64_t stages : {2, 3, 4, 8, 16})
    for (int64_t chunks : {1, 2, 3}) {
      const PipelineSchedule s = chunks > 1 ? PipelineSchedule::kInterleaved : PipelineSchedule::k1F1B;
      PipelineTimes t = uniform(stages, chunks, 0, 0);
      for (auto* side : {&t.forward, &t.backward})
        for (auto& stage : *side)
          for (double& d : stage) d = duration(random);
      t.transfer = 0.1;
      const int64_t per_micro_batch = 2 * stages * chunks;
      for (int64_t micro_batches : {stages * 6, (kMostSimulatedPasses / per_micro_batch / stages + 7) * stages}) {
        const PipelineRun whole = simulate_pipeline_whole(s, stages, micro_batches, chunks, t);
        const PipelineRun run = simulate_pipeline(s, stages, micro_batches, chunks, t);
        const double tolerance = micro_batches * per_micro_batch <= kMostSimulatedPasses ? 0 : 1e-3;
        EXPECT_NEAR(run.makespan, whole.makespan, tolerance * whole.makespan)
            << stages << " stages, " << chunks << " chunks, " << micro_batches << " micro-batches";
        for (size_t r = 0; r < whole.busy.size(); ++r) EXPECT_NEAR(run.busy[r], whole.busy[r], 1e-9 * whole.busy[r]);
      }
    }
}

}  // namespace
}  // namespace census
