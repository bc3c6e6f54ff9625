// File: plan.h
// `census plan`: every parallel layout of a model on N devices, the most-loaded rank's peak of each
// from the simulated step (step/step_census.h, every stage), whether it fits, and an estimated step
// time (plan/plan_cost.h) to rank the ones that fit.
//
// A layout is TP x CP x PP x DP = N with an EP degree (MoE models only) taken from the expert
// layers' data-parallel ranks, DP x CP (Megatron's expert-model-parallel groups), a schedule (1F1B, GPipe, interleaved over V chunks a stage; none
// where PP is 1), a recompute mode (none, selective, full) and a ZeRO stage (0-3, 0 alone where DP is
// 1). ZeRO shards over DP x CP, so a CP > 1 layout takes ZeRO 1-3 at DP 1. A micro-batch is one
// sequence, as the step runs it (a CP rank its S / C tokens), so the global batch B (sequences) sets
// the micro-batch count: M = B / DP.
//
// Divisibility (a layout that breaks one is pruned, never simulated): TP within a node (at most
// gpus_per_node) and dividing the heads and widths as tp_config splits them; CP dividing the sequence
// (census step's rule); EP dividing the experts, N, and DP x CP, with TP x EP inside a node (EP inside
// a node by default, as Megatron places it); PP x V dividing the layers; DP dividing B; the
// interleaved schedule's M a multiple of PP.
//
// The search: every layout's time estimate first (no simulation), then layouts in order of it. One
// whose parameters, gradients and optimizer states alone (every one live in AdamW's step, at the
// layout's ZeRO shares) exceed the memory is rejected unsimulated; another is simulated, stage 0 first
// (rejected there if that stage alone passes the memory), then every stage, each stage's step run once
// per (TP, CP, EP, PP, schedule, V, recompute) and reweighed for every ZeRO stage (StepOptions::also_composed).
// Where the search waits on a stage 0, those of the next layouts it would simulate run beside it, one a
// core (at most cores - 1 of them in vain, when the search stops). The search stops at the K-th layout that fits. Where none
// fits, it goes on to the layout with the smallest peak: the smallest memory that would fit.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "plan/plan_device.h"
#include "step/step_census.h"
#include "models/config.h"
#include "util/result.h"

namespace census {

struct PlanOptions {
  int64_t gpus = 0;
  int64_t gpu_memory = 0;  // bytes
  int64_t gpus_per_node = 8;
  int64_t seq_length = 4096;
  int64_t global_batch = 0;  // sequences; 0: one a device (B = N)
  Device device;
  double compute_efficiency = 0.5;  // of the peak, for a compute-bound part
  int64_t top = 5;
  bool fp32_master_weights = false;
  bool fp32_gradients = false;
  int64_t cuda_context = 0;
  int64_t nccl_buffers = 0;
  int64_t fragmentation = 0;
  // Rank on reserved bytes: each stage's step with PyTorch's caching allocator simulated over it
  // (step/step_alloc.h) under `alloc_conf`, its reserved peak in place of the allocated one (a layout
  // fits when that peak does, with no cache flush; the phase and split shown stay the allocated peak's).
  bool reserved = false;
  alloc::AllocConf alloc_conf;
};

struct Layout {
  int64_t tp = 1, cp = 1, ep = 1, pp = 1, dp = 1;
  PipelineSchedule schedule = PipelineSchedule::k1F1B;
  int64_t virtual_stages = 1;
  Recompute recompute = Recompute::kNone;
  int zero = 0;
  int64_t micro_batches = 1;
};

// A term of the step-time estimate.
struct TimeTerm {
  std::string name;
  double seconds;
  std::string formula;
};

struct LayoutResult {
  Layout layout;
  double step_seconds = 0;        // the estimate
  std::vector<TimeTerm> time;     // its terms (they sum to step_seconds)
  // Parameters, gradients and optimizer states at the ZeRO shares with the overheads; once stage 0 is
  // simulated, at least its total.
  int64_t lower_bound_bytes = 0;
  bool simulated = false;
  int64_t peak_bytes = 0;         // the most-loaded stage's total: census step's total_bytes
  int64_t worst_stage = 0;
  StepMoment peak;                // its composed peak (phase, op, split), before the overheads
  std::vector<int64_t> stage_bytes;
};

struct PlanCounts {
  int64_t tried = 0;                  // layouts enumerated
  int64_t pruned_divisibility = 0;
  int64_t rejected_memory_bound = 0;  // by their parameters, gradients and states alone
  int64_t rejected_memory_simulated = 0;
  int64_t fit = 0;                    // found to fit
  int64_t not_evaluated = 0;          // slower by the estimate than the K-th that fits
  int64_t simulations = 0;            // (TP, CP, EP, PP, schedule, V, recompute) steps simulated
  int64_t stage_runs = 0;             // census_step calls (one a stage), those run ahead included
};

struct PlanResult {
  std::vector<LayoutResult> top;  // those that fit, fastest first by the estimate
  PlanCounts counts;
  int64_t budget_bytes = 0;       // the memory less the overheads
  // Where nothing fits: the layout with the smallest peak (the memory that would fit it).
  std::optional<LayoutResult> smallest;
  std::vector<std::pair<std::string, int64_t>> pruned_by_rule;  // rule, layouts
};

std::string schedule_name(PipelineSchedule schedule);
std::string recompute_name(Recompute recompute);

// Refuse what is not a plan: no devices, no memory left after the overheads, a device figure that is
// not positive, an efficiency outside (0, 1], a top count below 1, a family the step does not model.
Status check_plan_options(const ModelConfig& config, const PlanOptions& options);

Result<PlanResult> census_plan(const ModelConfig& config, const PlanOptions& options);

}  // namespace census
