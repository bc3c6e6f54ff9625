// File: plan.h
// `census plan`: the parallel layouts of a model on N devices (plan/plan_layout.h), the most-loaded
// rank's peak of each from the simulated step (step/step_census.h, every stage), whether it fits, and an
// estimated step time (plan/plan_time.h) to rank the ones that fit; or one layout the user names.
//
// The search space: TP (inside a node) x CP x PP x DP = N; EP from DP x CP, or with whole experts
// (expert TP 1) from TP x DP x CP, inside a node or across nodes; 1F1B and interleaved schedules over every V the layers allow, each with the splits of
// balanced_splits (even; embedding and loss as layers; or Megatron's first and last stages' layers); the
// micro-batch size b, every divisor of the per-rank batch; recompute none, selective, full for every
// layer, and per layer kind where a model has two or three kinds; ZeRO 0-3 over DP x CP, and FSDP2 over
// DP as census step simulates it (--fsdp); TP as tp_config splits the layers, and DTensor's plan with
// sequence parallelism and loss_parallel (--sequence-parallel --loss-parallel) on a family it names.
// FSDP2 and SP are laid out only where census step takes them (neither beside CP or EP, nor under
// --reserved's allocator; FSDP2 not beside fp32 gradients composed): the search asks the step.
// Outside it: GPipe (1F1B runs the same passes with the same bubble and fewer micro-batches in flight),
// TP across nodes, uneven splits other than those, recompute by layer index, FSDP2 or SP beside CP or EP,
// FSDP2's reshard_after_forward other than its default, zero-bubble and DualPipe schedules, FP8.
// --layout prices any layout, GPipe included.
//
// The search, best first: every layout gets a lower bound of its estimate (its busiest stage's work,
// the gradients' reduction and the optimizer step, without the bubble), cheap; the layout whose bound is
// lowest gets its whole estimate (the pipeline simulated) and goes back in line, until the lowest in line
// has its whole estimate: the fastest left. One whose parameters, gradients and optimizer states alone
// (every one live in AdamW's step, at the layout's ZeRO shares) exceed the memory is rejected
// unsimulated; another is simulated, stage 0 first (rejected there if that stage alone passes the
// memory), then every stage, each stage's step run once per layout but its ZeRO stage and reweighed for
// every ZeRO stage (StepOptions::also_composed), an FSDP2 layout's step its own. Where the search waits on a stage 0, those of the next
// layouts it would simulate run beside it, one a core. The search stops at the K-th layout that fits.
// Where none fits, it goes on to the layout with the smallest peak: the smallest memory that would fit.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/config.h"
#include "plan/plan_device.h"
#include "plan/plan_layout.h"
#include "plan/plan_time.h"
#include "step/step_census.h"
#include "util/result.h"

namespace census {

// The bounds on what a plan's user states (census plan's options, census_plan's arguments), past
// which an answer would be no plan: a global batch of at most 2^24 sequences; at most 100,000 layouts
// shown (the search simulates layouts until that many fit; a JSON reader may take every layout of a
// small search); device figures (TFLOPS, GB/s) and the compute efficiency finite and within these, so
// that the time estimate stays a number (1e-300 TFLOPS would make a step of 1e300 seconds; 1e9 GB/s
// makes a term vanish, as a test pricing one term alone wants).
inline constexpr int64_t kLargestGlobalBatch = int64_t{1} << 24;
inline constexpr int64_t kLargestTop = 100000;
inline constexpr double kLeastFigure = 1e-3, kLargestFigure = 1e9;
inline constexpr double kLeastEfficiency = 1e-3;

struct PlanOptions {
  RunShape run;              // gpus, gpus_per_node, seq_length, global_batch (0: one a device)
  int64_t gpu_memory = 0;    // bytes
  Device device;             // its figures and calibration
  TimeOptions time;          // overlaps, master weights, gradients' dtype
  int64_t top = 5;
  int64_t cuda_context = 0;
  int64_t nccl_buffers = 0;
  int64_t fragmentation = 0;
  // Rank on reserved bytes: each stage's step with PyTorch's caching allocator simulated over it
  // (step/step_alloc.h) under `alloc_conf`, its reserved peak in place of the allocated one (a layout
  // fits when that peak does, with no cache flush; the phase and split shown stay the allocated peak's).
  bool reserved = false;
  alloc::AllocConf alloc_conf;
  std::optional<Layout> layout;  // --layout: this one alone
  // --search: the losses and the optimizers searched beside the layouts (empty: the run's own). Each
  // combination census step takes on the model is planned; the layouts of all are ranked together.
  std::vector<nn::CausalLMLoss> search_losses;
  std::vector<StepOptimizer> search_optimizers;
};

// What `census plan --search loss,optimizer` tries: every loss (each computes the same cross-entropy,
// in its own chunks and kernels), and AdamW with the optimizers that run AdamW's update on other
// states (8-bit, paged, 4-bit); not SGD, Adafactor or Muon, which train another way.
const std::vector<nn::CausalLMLoss>& searched_losses();
const std::vector<StepOptimizer>& searched_optimizers();

struct LayoutResult {
  Layout layout;
  // The optimizer and the loss its step runs: the run's, or under --search the combination it was
  // planned with.
  StepOptimizer optimizer = StepOptimizer::kAdamW;
  nn::CausalLMLoss loss = nn::CausalLMLoss::kForCausalLM;
  TimeEstimate time;               // complete for every layout reported
  // Parameters, gradients and optimizer states at the ZeRO shares with the overheads; once stage 0 is
  // simulated, at least its total.
  int64_t lower_bound_bytes = 0;
  int64_t memory_bound_bytes = 0;  // plan/plan_memory.h's bound, before any simulation
  bool simulated = false;
  int64_t peak_bytes = 0;          // the most-loaded stage's total: census step's total_bytes
  int64_t worst_stage = 0;
  StepMoment peak;                 // its composed peak (phase, op, split), before the overheads
  std::vector<int64_t> stage_bytes;  // -1: not simulated, stood for by standing[stage]
  std::vector<int64_t> standing;     // by stage: the stage whose simulation stands for it (standing_stages)
};

struct PlanCounts {
  int64_t tried = 0;                  // layouts enumerated
  int64_t pruned_divisibility = 0;
  int64_t estimated = 0;              // layouts whose whole estimate was made (the rest: a lower bound only)
  int64_t rejected_memory_bound = 0;  // by their parameters, gradients and states alone
  int64_t rejected_memory_simulated = 0;
  int64_t fit = 0;                    // found to fit
  int64_t not_evaluated = 0;          // slower by the estimate than the K-th that fits
  int64_t simulations = 0;            // steps simulated (a layout but its ZeRO stage)
  int64_t stage_runs = 0;             // census_step calls (one a stage), those run ahead included
};

struct PlanResult {
  std::vector<LayoutResult> top;  // those that fit, fastest first by the estimate
  PlanCounts counts;
  int64_t budget_bytes = 0;       // the memory less the overheads
  // Where nothing fits: the layout with the smallest peak (the memory that would fit it).
  std::optional<LayoutResult> smallest;
  std::vector<std::pair<std::string, int64_t>> pruned_by_rule;  // rule, layouts
  std::optional<LayoutResult> named;  // --layout's, fitting or not
};

// Refuse what is not a plan: no devices, no memory left after the overheads, a device figure that is
// not positive, a calibration out of range, a top count below 1, a family the step does not model.
Status check_plan_options(const ModelConfig& config, const PlanOptions& options);

// Why the search keeps EP at 1 for `config` (no experts; eager experts, which census step does not
// shard; Llama 4's, which expert parallelism does not shard), or nullptr where it searches EP degrees.
const char* why_expert_parallel_stays_one(const ModelConfig& config);

// The run every layout of a plan is laid out against: options.run with its global batch (one sequence a
// device where none is given), its dtypes and allocator from the time options and `reserved`.
RunShape plan_run(const PlanOptions& options);

Result<PlanResult> census_plan(const ModelConfig& config, const PlanOptions& options);

}  // namespace census
