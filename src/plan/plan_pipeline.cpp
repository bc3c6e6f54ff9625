#include "plan/plan_pipeline.h"

#include <algorithm>
#include <cassert>
#include <limits>

namespace census {

double PipelineRun::bubble() const {
  double busiest = 0;
  for (double b : busy) busiest = std::max(busiest, b);
  return std::max(0.0, makespan - busiest);
}

PipelineRun simulate_pipeline_whole(PipelineSchedule schedule, int64_t stages, int64_t micro_batches,
                                    int64_t virtual_stages, const PipelineTimes& t) {
  const int64_t p = stages, v = virtual_stages, m = micro_batches, chunks = p * v;
  constexpr double kPending = -1;
  // When each (micro-batch, chunk) pass ended, by global chunk g = chunk v P + stage r.
  std::vector<double> forward_end(static_cast<size_t>(m * chunks), kPending), backward_end = forward_end;
  auto at = [&](int64_t micro_batch, int64_t g) { return static_cast<size_t>(micro_batch * chunks + g); };
  std::vector<std::vector<StepPass>> orders;
  for (int64_t r = 0; r < p; ++r) orders.push_back(pipeline_order(schedule, p, r, m, v));
  std::vector<size_t> next(static_cast<size_t>(p), 0);
  std::vector<double> free_at(static_cast<size_t>(p), 0);
  PipelineRun run;
  run.busy.assign(static_cast<size_t>(p), 0);
  size_t left = 0;
  for (const auto& order : orders) left += order.size();
  while (left > 0) {
    bool moved = false;
    for (int64_t r = 0; r < p; ++r) {
      auto& order = orders[static_cast<size_t>(r)];
      size_t& i = next[static_cast<size_t>(r)];
      for (; i < order.size(); ++i) {
        const StepPass& pass = order[i];
        const int64_t g = pass.chunk * p + r;
        double ready = 0;
        if (pass.pass == 'F') {
          if (g > 0) {
            const double before = forward_end[at(pass.micro_batch, g - 1)];
            if (before == kPending) break;
            ready = before + t.transfer;
          }
        } else if (g < chunks - 1) {
          const double after = backward_end[at(pass.micro_batch, g + 1)];
          if (after == kPending) break;
          ready = after + t.transfer;
        }
        const auto& durations = pass.pass == 'F' ? t.forward : t.backward;
        const double d = durations[static_cast<size_t>(r)][static_cast<size_t>(pass.chunk)];
        const double start = std::max(free_at[static_cast<size_t>(r)], ready);
        free_at[static_cast<size_t>(r)] = start + d;
        run.busy[static_cast<size_t>(r)] += d;
        (pass.pass == 'F' ? forward_end : backward_end)[at(pass.micro_batch, g)] = start + d;
        --left;
        moved = true;
      }
    }
    assert(moved && "a schedule whose passes wait on each other");
    if (!moved) break;
  }
  for (double end : free_at) run.makespan = std::max(run.makespan, end);
  return run;
}

PipelineRun simulate_pipeline(PipelineSchedule schedule, int64_t stages, int64_t micro_batches, int64_t virtual_stages,
                              const PipelineTimes& t) {
  const int64_t passes_per_micro_batch = 2 * stages * virtual_stages;
  if (stages == 1 || micro_batches * passes_per_micro_batch <= kMostSimulatedPasses)
    return simulate_pipeline_whole(schedule, stages, micro_batches, virtual_stages, t);
  // The longest run of whole groups of P micro-batches within the budget, and one group less.
  const int64_t high_m = std::max<int64_t>(2, kMostSimulatedPasses / passes_per_micro_batch / stages) * stages;
  const PipelineRun low = simulate_pipeline_whole(schedule, stages, high_m - stages, virtual_stages, t);
  const PipelineRun high = simulate_pipeline_whole(schedule, stages, high_m, virtual_stages, t);
  const double extra = static_cast<double>(micro_batches - high_m) / static_cast<double>(stages);
  PipelineRun run;
  run.makespan = high.makespan + extra * (high.makespan - low.makespan);
  for (size_t r = 0; r < low.busy.size(); ++r) run.busy.push_back(high.busy[r] + extra * (high.busy[r] - low.busy[r]));
  return run;
}

}  // namespace census
