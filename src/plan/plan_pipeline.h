// File: plan_pipeline.h
// A pipeline schedule's time, from the simulation's own order: each stage runs its passes in the order
// the step runs them (pipeline_order, step/step_census.h), a pass starting once its stage is free and its
// input has arrived: a forward through model chunk g needs the forward through chunk g - 1 of the same
// micro-batch, a backward through chunk g the backward through chunk g + 1 (the last chunk's, its own
// forward), each hidden state or gradient then sent on in `transfer` seconds where the two chunks sit on
// different stages. The makespan is when the last pass ends; each stage is busy for the sum of its
// passes; the bubble is the makespan less the busiest stage's time.
//
// Every pass is simulated up to 2^17 of them (a step of M micro-batches runs 2 M P V passes). A longer
// step is simulated on as many whole groups of P micro-batches as that allows and on one group less, and
// extended along the line through the two: past its warm-up, each group of P adds as much as the last
// (the busiest stage sets the pace). tests/plan/plan_pipeline_test.cpp holds the extension within 0.1 %
// of the whole simulation.
#pragma once

#include <cstdint>
#include <vector>

#include "step/step_census.h"

namespace census {

inline constexpr int64_t kMostSimulatedPasses = int64_t{1} << 17;

struct PipelineTimes {
  // One micro-batch's pass through stage r's chunk v: [r][v], in seconds.
  std::vector<std::vector<double>> forward, backward;
  double transfer = 0;  // a hidden state, or its gradient, from one stage to the next
};

struct PipelineRun {
  double makespan = 0;
  std::vector<double> busy;  // by stage
  double bubble() const;     // makespan less the busiest stage's busy time
};

PipelineRun simulate_pipeline(PipelineSchedule schedule, int64_t stages, int64_t micro_batches, int64_t virtual_stages,
                              const PipelineTimes& times);
// Every micro-batch simulated (what simulate_pipeline's extension is tested against).
PipelineRun simulate_pipeline_whole(PipelineSchedule schedule, int64_t stages, int64_t micro_batches,
                                    int64_t virtual_stages, const PipelineTimes& times);

}  // namespace census
