#include "plan/plan.h"

#include "plan/plan_memory.h"
#include "util/parallel.h"

#include <algorithm>
#include <limits>
#include <map>
#include <queue>
#include <set>
#include <thread>

namespace census {

Status check_plan_options(const ModelConfig& config, const PlanOptions& o) {
  const RunShape& run = o.run;
  if (o.layout && (!o.search_losses.empty() || !o.search_optimizers.empty()))
    return refuse("--search with --layout", "a named layout is priced as one run; give --loss and --optimizer instead");
  if (run.gpus < 1) return refuse("--gpus", std::to_string(run.gpus) + " is not a number of devices; give 1 or more");
  if (run.gpus > kLargestDegree)
    return refuse("--gpus", std::to_string(run.gpus) + " is more devices than a run has; give at most " +
                                std::to_string(kLargestDegree));
  if (run.global_batch > kLargestGlobalBatch)
    return refuse("--global-batch", std::to_string(run.global_batch) + " sequences is more than a step takes; give at most " +
                                        std::to_string(kLargestGlobalBatch));
  if (run.gpus_per_node < 1 || run.gpus_per_node > kLargestDegree)
    return refuse("--gpus-per-node", "must be 1 to " + std::to_string(kLargestDegree) + " devices");
  if (o.gpu_memory < 1 || o.gpu_memory > kLargestBytes)
    return refuse("--gpu-memory", "must be a positive size of at most 2^60 bytes, such as 80GiB");
  for (const auto& [flag, value] : {std::pair{"--cuda-context", o.cuda_context}, std::pair{"--nccl-buffers", o.nccl_buffers},
                                    std::pair{"--fragmentation", o.fragmentation}})
    if (value < 0 || value > kLargestBytes) return refuse(flag, "must be 0 to 2^60 bytes");
  // Each at most 2^60: their sum cannot wrap.
  const int64_t overheads = o.cuda_context + o.nccl_buffers + o.fragmentation;
  if (overheads >= o.gpu_memory)
    return refuse("--gpu-memory", std::to_string(o.gpu_memory) + " bytes leave nothing after the overheads (" +
                                      std::to_string(overheads) + " bytes); give more memory or smaller overheads");
  if (run.seq_length < 1) return refuse("--seq-length", "must be at least 1");
  if (run.global_batch < 0) return refuse("--global-batch", "must be a positive number of sequences");
  if (o.top < 1 || o.top > kLargestTop) return refuse("--top", "must be 1 to " + std::to_string(kLargestTop) + " layouts");
  for (const auto& [flag, value] : {std::pair{"--peak-tflops", o.device.peak_tflops}, std::pair{"--hbm-gbs", o.device.hbm_gbs},
                                    std::pair{"--link-gbs", o.device.link_gbs}, std::pair{"--nic-gbs", o.device.nic_gbs}})
    if (!(value >= kLeastFigure && value <= kLargestFigure))
      return refuse(flag, "must be a figure from 0.001 to 1e+09; give it, or a --device preset");
  CENSUS_TRY(check_calibration(o.device.calibration, "the calibration"));
  // Adapters, a 4-bit base and autocast: census step prices them on one device's whole model, with the
  // optimizers and losses it names; asked otherwise, the plan is refused here, not left with no layout.
  if (run.fine_tuning() && run.gpus > 1)
    return refuse(std::string(run.lora ? "--lora" : run.quantize ? "--quantize" : "--autocast") + " with --gpus " +
                      std::to_string(run.gpus),
                  "adapters, a 4-bit base and autocast are priced on one device's whole model yet; give --gpus 1");
  StepOptions probe;
  probe.seq_length = run.seq_length;
  if (run.fine_tuning()) probe = layout_step_options(Layout{}, plan_run(o), 0);
  return check_step_options(config, probe);
}

const char* why_expert_parallel_stays_one(const ModelConfig& c) {
  if (c.moe.num_experts == 0) return "no experts";
  if (c.moe.experts_implementation != nn::ExpertsImplementation::kGroupedMm)
    return "eager experts: census step shards grouped_mm ones";
  if (!c.moe.shards_under_expert_parallel)
    return "its experts run every token through every expert, which EP does not shard";
  return nullptr;
}

namespace {

constexpr int64_t kMostMicroBatchTokens = 65536;

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> low, high;
  for (int64_t d = 1; d * d <= n; ++d) {
    if (n % d != 0) continue;
    low.push_back(d);
    if (d != n / d) high.push_back(n / d);
  }
  low.insert(low.end(), high.rbegin(), high.rend());
  return low;
}

// The EP degrees of a model: the divisors of its experts that divide N (each one a candidate the rules
// then prune), or 1 alone where why_expert_parallel_stays_one says so.
std::vector<int64_t> ep_degrees(const ModelConfig& c, int64_t n) {
  if (why_expert_parallel_stays_one(c) != nullptr) return {1};
  std::vector<int64_t> out;
  for (int64_t e : divisors(c.moe.num_experts))
    if (n % e == 0) out.push_back(e);
  return out;
}

// The recompute choices the search tries: none, selective, full for every layer; per layer kind every
// combination where the model has two or three kinds. Beside Liger's kernels no selective policy: the
// bounds read the layer census's, which no oracle has checked beside Liger's functions. Fine-tuning: none
// and full alone.
std::vector<RecomputeChoice> recompute_choices(const ModelConfig& c, const RunShape& run) {
  const std::vector<Recompute> kModes = c.liger.any() || run.fine_tuning()
                                            ? std::vector{Recompute::kNone, Recompute::kFull}
                                            : std::vector{Recompute::kNone, Recompute::kSelective, Recompute::kFull};
  const int64_t base = static_cast<int64_t>(kModes.size());
  std::vector<RecomputeChoice> out;
  for (Recompute r : kModes) out.push_back({r, {}});
  // Fine-tuning is priced with no checkpointing or the Trainer's, of every layer alike (check_lora,
  // check_autocast).
  if (run.fine_tuning()) return out;
  std::vector<std::string> kinds;
  for (const std::string& kind : layer_kinds(c))
    if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) kinds.push_back(kind);
  if (kinds.size() < 2 || kinds.size() > 3) return out;
  int64_t combinations = 1;
  for (size_t k = 0; k < kinds.size(); ++k) combinations *= base;
  for (int64_t code = 0; code < combinations; ++code) {
    std::vector<Recompute> modes;
    for (int64_t rest = code, k = 0; k < static_cast<int64_t>(kinds.size()); ++k, rest /= base)
      modes.push_back(kModes[static_cast<size_t>(rest % base)]);
    if (std::all_of(modes.begin(), modes.end(), [&](Recompute m) { return m == modes.front(); })) continue;
    RecomputeChoice choice{modes.front(), {}};  // the first kind's mode for the rest, the others named
    for (size_t k = 1; k < kinds.size(); ++k)
      if (modes[k] != choice.all) choice.by_kind.emplace_back(kinds[k], modes[k]);
    out.push_back(choice);
  }
  return out;
}

// A layout but its recompute and data-parallel mode, as the search enumerates it.
struct Shape {
  int64_t tp, cp, ep, etp, pp, dp, v, mbs, micro_batches;
  PipelineSchedule schedule;
  PipelineSplit split;
  bool sp;    // DTensor's plan with sequence parallelism and loss_parallel
  bool fsdp;  // FSDP2 is among its data-parallel modes (census step takes it here)
};

// The data-parallel modes of a candidate: ZeRO 0-3, and FSDP2.
constexpr int kFsdpMode = 4;

// A layout of the search: a shape, a recompute choice and a data-parallel mode, with what is known of it.
struct Candidate {
  int32_t shape = 0;
  int16_t recompute = 0;
  int8_t zero = 0;  // ZeRO 0-3, or kFsdpMode
  bool complete = false;  // `seconds` is the whole estimate (else a lower bound)
  bool activations_bounded = false;  // memory_bound holds the activations' bound too
  bool activations_whole = false;    // that bound with its layers' backwards (else one enough to reject)
  double seconds = 0;
  int64_t memory_bound = 0;  // the larger of MemoryBound's two
};

// One layout but its ZeRO stage (FSDP2's, a simulation of its own), simulated stage by stage as the
// search needs them: each stage's composed peak by ZeRO stage.
struct Simulation {
  std::vector<std::optional<std::vector<StepMoment>>> stages;  // [stage][zero index]
};

// What one plan of a --search needs to find (Note [The search over losses and optimizers]): only the
// layouts faster than `faster_than` (the slowest of the --top found so far by the others), and the
// smallest peak only where the others found nothing that fits.
struct SearchCut {
  double faster_than = std::numeric_limits<double>::infinity();
  bool smallest = true;
};

class Planner {
 public:
  Planner(const ModelConfig& config, const PlanOptions& options, SearchCut cut = {})
      : c_(config), o_(options), run_(options.run), cut_(cut), time_(config, options.run, options.device, options.time),
        memory_(config, options.run, options.time.fp32_master_weights, options.time.fp32_gradients,
                options.cuda_context + options.nccl_buffers + options.fragmentation),
        recomputes_(recompute_choices(config, options.run)) {}
  Result<PlanResult> run();

 private:
  Layout layout_of(const Shape& s) const {
    Layout l;
    l.tp = s.tp, l.cp = s.cp, l.ep = s.ep, l.etp = s.etp, l.pp = s.pp, l.dp = s.dp, l.virtual_stages = s.v;
    l.schedule = s.schedule, l.split = s.split, l.micro_batch_size = s.mbs, l.micro_batches = s.micro_batches;
    l.sp = s.sp;
    return l;
  }
  Layout layout_of(const Candidate& cand) const {
    Layout l = layout_of(shapes_[static_cast<size_t>(cand.shape)]);
    l.recompute = recomputes_[static_cast<size_t>(cand.recompute)];
    l.fsdp = cand.zero == kFsdpMode;
    l.zero = l.fsdp ? 0 : cand.zero;
    return l;
  }
  // The data-parallel modes of a shape: ZeRO 0 (and 1-3 over DP x CP > 1), and FSDP2 where census step
  // takes it.
  std::vector<int> modes_of(const Shape& s) const {
    std::vector<int> modes = zeros_of(s.dp * s.cp);
    if (s.fsdp) modes.push_back(kFsdpMode);
    return modes;
  }
  int64_t variants_of(const Shape& s) const { return static_cast<int64_t>(recomputes_.size() * modes_of(s).size()); }
  // Whether census step takes `l` (its degrees, SP and FSDP2, the run's dtypes and allocator), cached by
  // what its refusals of FSDP2 and DTensor's plan read.
  bool step_takes(const Layout& l);
  void enumerate(PlanResult& result);
  // Why the pipeline of (PP, V, split) breaks a rule (cached: many shapes share it), or empty.
  const std::string& pipeline_rule(int64_t pp, int64_t v, const PipelineSplit& split);
  // The lower bound of a candidate's estimate, and of its memory: the states' bound, and with
  // `activations` the activations' too (bound_activations, `whole` or enough to reject).
  void bound(Candidate& cand, bool activations = true, bool whole = false);
  // The activations' bound where the states' passes: layer_kept_bytes runs (or the model's forward, for
  // a model with a layer that cannot run alone), made for the candidates that reach the front of the line.
  // With `whole` false, it stops short of the layers' backwards where the bound without them already
  // rejects the candidate (MemoryBound::activations' `enough`).
  void bound_activations(Candidate& cand, const TimeEstimate& bound, bool whole = false);
  Simulation& simulation(const Layout& l);
  Status run_stages(const std::vector<std::pair<Layout, int64_t>>& jobs);
  // A simulated stage 0's peak at the layout's ZeRO stage, with the overheads.
  int64_t stage0_bytes(const Layout& l) { return (*simulation(l).stages[0])[zero_index(l)].bytes + overheads(); }
  // The layout's peak: stage 0 first, where that alone passes `budget` rejected on it; else every stage.
  Status evaluate(LayoutResult& r, std::optional<int64_t> budget);
  LayoutResult result_of(const Layout& l, int64_t lower_bound_bytes) {
    LayoutResult r;
    r.layout = l;
    r.time = time_.estimate(l, /*complete=*/true, /*formulas=*/true);
    r.lower_bound_bytes = r.memory_bound_bytes = lower_bound_bytes;
    return r;
  }
  int64_t overheads() const { return o_.cuda_context + o_.nccl_buffers + o_.fragmentation; }
  // ZeRO 0 to 3 over DP x CP > 1; no ZeRO-3 beside a loss that reads the head's weight itself (TRL's,
  // Liger's, torchtune's), and none beside an optimizer whose states ZeRO's flat shards do not hold
  // (laid out by rows, columns or blocks), which census step refuses.
  std::vector<int> zeros_of(int64_t dp_cp) const {
    if (dp_cp <= 1) return {0};
    if (run_.optimizer != StepOptimizer::kNone && !optimizer_states_shard_with_parameters(run_.optimizer)) return {0};
    if (run_.loss != nn::CausalLMLoss::kForCausalLM) return {0, 1, 2};
    return {0, 1, 2, 3};
  }
  // The layout's step's composition (step/step_compose.h) at ZeRO stage `zero`, with the user's overheads.
  StepComposition composition(const Layout& l, int zero) const {
    StepComposition c = layout_step_options(l, run_, 0).composition;
    c.zero = zero;
    c.cuda_context = o_.cuda_context;
    c.nccl_buffers = o_.nccl_buffers;
    c.fragmentation = o_.fragmentation;
    return c;
  }
  // The ZeRO stages a simulation of `l` composes (FSDP2's: none but its own).
  std::vector<int> composed_zeros(const Layout& l) const { return l.fsdp ? std::vector<int>{0} : zeros_of(l.dp * l.cp); }
  // The zero stage's index among those a simulation of `l` composes.
  size_t zero_index(const Layout& l) const {
    const std::vector<int> zeros = composed_zeros(l);
    return static_cast<size_t>(std::find(zeros.begin(), zeros.end(), l.zero) - zeros.begin());
  }
  // The simulation a layout shares with its other ZeRO stages.
  static std::string simulation_key(const Layout& l) {
    return std::string(l.fsdp ? "fsdp/" : "") + (l.sp ? "sp/" : "") + std::to_string(l.tp) + "/" + std::to_string(l.cp) + "/" + std::to_string(l.ep) + "/" + std::to_string(l.etp) +
           "/" + std::to_string(l.pp) + "/" +
           std::to_string(static_cast<int>(l.schedule)) + "/" + std::to_string(l.virtual_stages) + "/" +
           split_name(l.split) + "/" + std::to_string(l.micro_batch_size) + "/" + std::to_string(l.micro_batches) + "/" +
           recompute_text(l.recompute);
  }

  const ModelConfig& c_;
  const PlanOptions& o_;
  RunShape run_;
  SearchCut cut_;
  TimeModel time_;
  MemoryBound memory_;
  std::vector<RecomputeChoice> recomputes_;
  std::vector<Shape> shapes_;
  std::vector<Candidate> candidates_;
  std::map<std::string, Simulation> simulations_;
  std::map<std::tuple<int64_t, int64_t, std::string>, std::string> pipeline_rules_;
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, bool, bool>, bool> step_takes_;  // (TP, CP, EP, ETP, SP, FSDP)
  PlanCounts counts_;
};

const std::string& Planner::pipeline_rule(int64_t pp, int64_t v, const PipelineSplit& split) {
  auto [it, made] = pipeline_rules_.try_emplace({pp, v, split_name(split)});
  if (!made) return it->second;
  if (!pipeline_chunks(c_.num_hidden_layers, pp, v, split)) {
    it->second = v > 1 ? "PP x V does not split the layers" : "PP does not split the layers";
    return it->second;
  }
  // What else census step refuses of a pipeline (a family that cannot be cut there).
  Layout l;
  l.pp = pp, l.virtual_stages = v, l.split = split;
  l.schedule = v > 1 ? PipelineSchedule::kInterleaved : PipelineSchedule::k1F1B;
  l.micro_batches = pp;
  if (!check_step_options(c_, layout_step_options(l, run_, 0))) it->second = "census step refuses it";
  return it->second;
}

bool Planner::step_takes(const Layout& l) {
  auto [it, made] = step_takes_.try_emplace({l.tp, l.cp, l.ep, l.etp, l.sp, l.fsdp}, false);
  if (made) {
    // The refusals of FSDP2 and DTensor's plan read these (step_census.cpp's check_rank_model_combinations,
    // the family's names, the vocabulary and tokens TP divides): a probe with them, unpipelined.
    Layout probe;
    probe.tp = l.tp, probe.cp = l.cp, probe.ep = l.ep, probe.etp = l.etp, probe.sp = l.sp, probe.fsdp = l.fsdp;
    probe.dp = std::max<int64_t>(2, l.dp);
    it->second = check_step_options(c_, layout_step_options(probe, run_, 0)).ok();
  }
  return it->second;
}

void Planner::enumerate(PlanResult& result) {
  std::map<std::string, int64_t> pruned;
  const int64_t n = run_.gpus, layers = c_.num_hidden_layers, batch = run_.global_batch;
  const std::vector<int64_t> eps = ep_degrees(c_, n);
  const bool whole_experts = c_.moe.moe_intermediate_size > 0;  // experts of their own width TP can leave whole
  std::map<int64_t, std::vector<std::tuple<PipelineSchedule, int64_t, PipelineSplit>>> pipelines;  // by PP
  for (int64_t tp : divisors(n)) {
    const std::string tp_rule = tensor_parallel_rule(c_, run_, tp);
    for (int64_t cp : divisors(n / tp))
      for (int64_t pp : divisors(n / tp / cp)) {
        // The schedules: none without a pipeline; 1F1B, and interleaved over each V, each with the
        // splits balanced_splits finds.
        auto [found, made] = pipelines.try_emplace(pp);
        for (int64_t v = 1; made && (v == 1 || (pp > 1 && v * pp <= layers)); ++v) {
          std::vector<PipelineSplit> splits = balanced_splits(layers, pp, v);
          if (splits.empty() && v == 1) splits.push_back({});  // counted as pruned below
          for (const PipelineSplit& split : splits)
            found->second.emplace_back(v == 1 ? PipelineSchedule::k1F1B : PipelineSchedule::kInterleaved, v, split);
        }
        const int64_t dp = n / tp / cp / pp;
        std::vector<int64_t> sizes = batch % dp == 0 ? divisors(batch / dp) : std::vector<int64_t>{1};
        // Past 64k tokens a micro-batch (b S) every GEMM is saturated and the activations are the largest
        // any run holds: larger micro-batches are outside the search.
        while (sizes.size() > 1 && sizes.back() * run_.seq_length > kMostMicroBatchTokens) sizes.pop_back();
        // The experts' TP: TP's, and where TP splits them and EP shards them, whole (ETP 1).
        for (int64_t ep : eps)
          for (int64_t etp : whole_experts && tp > 1 && ep > 1 ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{0})
          for (bool sp : {false, true}) {
          // TP's modes: tp_config's split, and DTensor's plan with sequence parallelism where census step
          // runs it (a family whose names the plan knows; no CP or EP beside it); the data-parallel ones:
          // ZeRO, and FSDP2 over DP where census step runs it (no CP or EP beside it).
          // Beside CP or EP census step refuses both (check_rank_model_combinations): it is asked the rest.
          const bool alone = cp == 1 && ep == 1 && tp_rule.empty();
          Layout modes;
          modes.tp = tp, modes.cp = cp, modes.ep = ep, modes.etp = etp, modes.dp = dp, modes.sp = sp;
          if (sp && (tp == 1 || !alone || !step_takes(modes))) continue;
          modes.fsdp = true;
          const bool fsdp = dp > 1 && alone && step_takes(modes);
          const int64_t variants = static_cast<int64_t>(recomputes_.size() * (zeros_of(dp * cp).size() + (fsdp ? 1 : 0)));
          for (const auto& [schedule, v, split] : found->second)
            for (int64_t mbs : sizes) {
              counts_.tried += variants;
              const int64_t m = batch % dp == 0 ? batch / dp / mbs : 1;
              std::string why = tp_rule;
              if (!why.empty()) {
              } else if (run_.seq_length % cp != 0) {
                why = "CP does not divide the sequence length";
              } else if (cp > 1 && run_.loss != nn::CausalLMLoss::kForCausalLM) {
                why = "CP beside --loss " + std::string(nn::causal_lm_loss_name(run_.loss)) + " (census step refuses it)";
              } else if (cp > 1 && c_.liger.any()) {
                why = "CP beside --liger (census step refuses it)";
              } else if (ep > 1 && c_.moe.num_experts % ep != 0) {
                why = "EP does not divide the experts";
              } else if (((etp == 1 ? tp : 1) * dp * cp) % ep != 0) {
                // EP takes its ranks from the expert layers' data-parallel ones, DP x CP (Megatron's
                // expert-model-parallel groups inside its data-and-context-parallel group), and the TP
                // ranks too where the experts are whole.
                why = etp == 1 ? "EP does not divide TP x DP x CP" : "EP does not divide DP x CP";
              } else if (const std::string& rule = pipeline_rule(pp, v, split); !rule.empty()) {
                why = rule;
              } else if (batch % dp != 0) {
                why = "DP does not divide the global batch";
              } else if (schedule == PipelineSchedule::kInterleaved && m % pp != 0) {
                why = "interleaved: micro-batches not a multiple of PP";
              } else if (m * v > kLargestMicroBatches) {
                why = "more micro-batches than a step accumulates (B / DP / MBS x V past 2^12)";
              }
              if (!why.empty()) {
                pruned[why] += variants;
                counts_.pruned_divisibility += variants;
                continue;
              }
              shapes_.push_back({tp, cp, ep, etp, pp, dp, v, mbs, m, schedule, split, sp, fsdp});
            }
          }
      }
  }
  for (const auto& [rule, count] : pruned) result.pruned_by_rule.emplace_back(rule, count);
}

void Planner::bound(Candidate& cand, bool activations, bool whole) {
  const Layout l = layout_of(cand);
  const TimeEstimate t = time_.estimate(l, /*complete=*/false);
  if (!cand.complete) cand.seconds = t.seconds;  // a whole estimate is kept
  cand.memory_bound = memory_.states(l, t.chunk_parameters);
  if (activations) bound_activations(cand, t, whole);
}

void Planner::bound_activations(Candidate& cand, const TimeEstimate& bound, bool whole) {
  cand.activations_bounded = true;
  // The states' bound rejects it: no activations' bound, which the search for the smallest peak, where
  // nothing fits, takes whole (it ranks the layouts by their bounds).
  cand.activations_whole = whole || cand.memory_bound <= o_.gpu_memory;
  if (!cand.activations_whole) return;
  cand.memory_bound = std::max(
      cand.memory_bound, memory_.activations(layout_of(cand), bound.chunk_parameters, bound.stage_largest_layer_parameters,
                                             whole ? INT64_MAX : o_.gpu_memory, &cand.activations_whole));
}

Simulation& Planner::simulation(const Layout& l) {
  Simulation& sim = simulations_[simulation_key(l)];
  if (sim.stages.empty()) {
    sim.stages.resize(static_cast<size_t>(l.pp));
    ++counts_.simulations;
  }
  return sim;
}

Status Planner::run_stages(const std::vector<std::pair<Layout, int64_t>>& jobs) {
  // Each job is one stage's step, in its own Session: they run on as many threads as there are cores.
  std::vector<std::pair<Layout, int64_t>> missing;
  for (const auto& [layout, stage] : jobs) {
    bool queued = false;
    for (const auto& [other, other_stage] : missing)
      queued = queued || (other_stage == stage && simulation_key(other) == simulation_key(layout));
    if (!queued && !simulation(layout).stages[static_cast<size_t>(stage)]) missing.emplace_back(layout, stage);
  }
  if (missing.empty()) return {};
  std::vector<std::optional<Result<StepCensus>>> steps(missing.size());
  run_in_parallel(missing.size(), [&](size_t i) {
    const auto& [l, stage] = missing[i];
    StepOptions o = layout_step_options(l, run_, stage);
    o.composition = composition(l, 0);
    for (int z : composed_zeros(l)) o.also_composed.push_back(composition(l, z));
    o.allocator.reset();
    if (o_.reserved) {
      StepAllocatorOptions allocator;
      allocator.conf = o_.alloc_conf;
      allocator.device_total = o_.gpu_memory;
      o.allocator = allocator;
    }
    o.peak_holders = false;  // the plan reads the peaks alone,
    o.also_composed_only = true;  // its compositions' (each ZeRO stage's) alone
    steps[i].emplace(census_step(c_, o));
  });
  for (size_t i = 0; i < missing.size(); ++i) {
    CENSUS_TRY(*steps[i]);
    std::vector<StepMoment> peaks = std::move((*steps[i])->also_composed_peaks);
    if (o_.reserved)  // the reserved peak in place of the allocated one: the bytes that must fit
      for (size_t z = 0; z < peaks.size(); ++z) peaks[z].bytes = (*steps[i])->also_composed_allocators[z].reserved_peak;
    simulation(missing[i].first).stages[static_cast<size_t>(missing[i].second)] = std::move(peaks);
  }
  counts_.stage_runs += static_cast<int64_t>(missing.size());
  return {};
}

Status Planner::evaluate(LayoutResult& r, std::optional<int64_t> budget) {
  const size_t z = zero_index(r.layout);
  CENSUS_TRY(run_stages({{r.layout, 0}}));
  const int64_t stage0 = stage0_bytes(r.layout);
  r.lower_bound_bytes = std::max(r.lower_bound_bytes, stage0);
  if (budget && stage0 > *budget) {
    r.peak_bytes = stage0;
    return {};
  }
  // Every stage but those another stands for (Note [Stages a 1F1B pipeline need not simulate]).
  r.standing = standing_stages(c_, r.layout);
  std::vector<std::pair<Layout, int64_t>> all;
  for (int64_t s = 0; s < r.layout.pp; ++s)
    if (r.standing[static_cast<size_t>(s)] == s) all.emplace_back(r.layout, s);
  CENSUS_TRY(run_stages(all));
  const Simulation& sim = simulation(r.layout);
  r.simulated = true;
  r.stage_bytes.clear();
  for (const auto& stage : sim.stages) r.stage_bytes.push_back(stage ? (*stage)[z].bytes + overheads() : -1);
  r.worst_stage = 0;
  for (size_t s = 1; s < r.stage_bytes.size(); ++s)
    if (r.stage_bytes[s] > r.stage_bytes[static_cast<size_t>(r.worst_stage)]) r.worst_stage = static_cast<int64_t>(s);
  r.peak = (*sim.stages[static_cast<size_t>(r.worst_stage)])[z];
  r.peak_bytes = r.stage_bytes[static_cast<size_t>(r.worst_stage)];
  return {};
}

Result<PlanResult> Planner::run() {
  PlanResult result;
  result.budget_bytes = o_.gpu_memory - overheads();
  if (o_.layout) {  // the one layout named
    LayoutResult r = result_of(*o_.layout, 0);
    r.lower_bound_bytes = r.memory_bound_bytes =
        std::max(memory_.states(r.layout, r.time.chunk_parameters),
                 memory_.activations(r.layout, r.time.chunk_parameters, r.time.stage_largest_layer_parameters));
    CENSUS_TRY(evaluate(r, std::nullopt));
    counts_.tried = counts_.estimated = 1;
    (r.peak_bytes <= o_.gpu_memory ? counts_.fit : counts_.rejected_memory_simulated) = 1;
    result.named = std::move(r);
    result.counts = counts_;
    return result;
  }
  enumerate(result);
  if (shapes_.empty()) {
    std::string rules;
    for (const auto& [rule, count] : result.pruned_by_rule) rules += (rules.empty() ? "" : "; ") + rule + ": " + std::to_string(count);
    return refuse("--gpus " + std::to_string(run_.gpus), "no layout passes the divisibility rules (" + rules +
                                                            "); give another device count or --global-batch");
  }
  // Best first, in four kinds of entry: a shape at its floor, a shape at the bound of all its variants,
  // a variant at its own bound (its memory bounds checked before its estimate is made whole), a variant
  // at its whole estimate. The lowest in line is the fastest left once it is whole: every entry below it
  // is a lower bound.
  //
  // Note [Shapes bounded at the front of the line]
  // A shape's floor (Note [The shape's floor], plan/plan_time.cpp) is below its bound, kind and all, so
  // the shape is given its bound before anything its bound would follow leaves the line: the search
  // takes every other entry in the order it takes them with every shape at its bound from the start, and
  // prints the same plan; the shapes whose floor never reaches the front (most of a large search's) are
  // never bounded. tests/plan/plan_time_floor_test.cpp holds the floor below the bound on every shape of
  // whole searches.
  enum Kind : uint8_t { kFloor, kShape, kBound, kWhole };
  using Entry = std::tuple<double, uint8_t, size_t>;  // seconds, kind, index (ties: kind, then order)
  {
    // Note [Stack records made ahead], Note [Layer records made ahead]: the records the floors read, one
    // layout for each (TP, EP, ETP, SP, CP, b) the shapes reach, in the order the shapes are floored.
    std::vector<Layout> layouts;
    std::set<std::tuple<int64_t, int64_t, int64_t, bool, int64_t, int64_t>> reached;
    for (const Shape& s : shapes_)
      if (reached.emplace(s.tp, s.ep, s.etp, s.sp, s.cp, s.mbs).second) layouts.push_back(layout_of(s));
    time_.record_ahead(layouts);
  }
  // Every shape at its floor, heaped at once (no two entries tie: each kind's indices are its own).
  std::vector<Entry> floors;
  floors.reserve(shapes_.size());
  for (size_t i = 0; i < shapes_.size(); ++i) floors.emplace_back(time_.shape_floor(layout_of(shapes_[i])), kFloor, i);
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> line(std::greater<>(), std::move(floors));
  auto next_fastest = [&]() -> std::optional<size_t> {
    while (!line.empty()) {
      if (std::get<0>(line.top()) >= cut_.faster_than) return std::nullopt;  // the rest: not evaluated
      const auto [seconds, kind, i] = line.top();
      line.pop();
      if (kind == kWhole) return i;
      if (kind == kFloor) {
        line.emplace(time_.shape_bound(layout_of(shapes_[i])), kShape, i);
        continue;
      }
      if (kind == kShape) {
        for (size_t r = 0; r < recomputes_.size(); ++r)
          for (int z : modes_of(shapes_[i])) {
            Candidate cand;
            cand.shape = static_cast<int32_t>(i);
            cand.recompute = static_cast<int16_t>(r);
            cand.zero = static_cast<int8_t>(z);
            bound(cand, /*activations=*/false);  // at the front of the line
            candidates_.push_back(cand);
            line.emplace(cand.seconds, kBound, candidates_.size() - 1);
          }
        continue;
      }
      Candidate& cand = candidates_[i];
      if (!cand.activations_bounded) bound_activations(cand, time_.estimate(layout_of(cand), /*complete=*/false));
      if (cand.memory_bound > o_.gpu_memory) {  // cannot fit: its estimate is not needed
        ++counts_.rejected_memory_bound;
        continue;
      }
      cand.seconds = time_.estimate(layout_of(cand), /*complete=*/true).seconds;
      cand.complete = true;
      ++counts_.estimated;
      line.emplace(cand.seconds, kWhole, i);
    }
    return std::nullopt;
  };
  const size_t cores = std::max(1u, std::thread::hardware_concurrency());
  std::vector<size_t> ahead;  // the next fastest, taken from the line to run their stage 0 beside
  while (static_cast<int64_t>(result.top.size()) < o_.top) {
    std::optional<size_t> i;
    if (!ahead.empty()) {
      i = ahead.front();
      ahead.erase(ahead.begin());
    } else {
      i = next_fastest();
    }
    if (!i) break;
    // A copy: taking the next layouts from the line below grows candidates_, which may move it.
    const Candidate cand = candidates_[*i];
    const Layout layout = layout_of(cand);
    // Note [Stages simulated side by side]
    // One stage a core at once: this layout's stages still to simulate (unless its stage 0, simulated
    // ahead, already rules it out), then the stage 0 of the next layouts the search would simulate,
    // while they could still be printed (this layout and those ahead, all fitting, would not yet fill
    // --top). A stage run beside its layout's stage 0 is in vain where that stage rules the layout out,
    // which the bounds make rare; none runs for a layout past those --top could still print. Every
    // simulation is cached: what the search prints does not depend on the order they ran in.
    std::vector<std::pair<Layout, int64_t>> jobs;
    const Simulation& sim = simulation(layout);
    if (!sim.stages[0] || stage0_bytes(layout) <= o_.gpu_memory) {
      const std::vector<int64_t> standing = standing_stages(c_, layout);
      for (int64_t s = 0; s < layout.pp && jobs.size() < cores; ++s)
        if (standing[static_cast<size_t>(s)] == s && !sim.stages[static_cast<size_t>(s)]) jobs.emplace_back(layout, s);
      while (!jobs.empty() && jobs.size() < cores &&
             static_cast<int64_t>(result.top.size() + ahead.size()) + 1 < o_.top) {
        std::optional<size_t> j = next_fastest();
        if (!j) break;
        ahead.push_back(*j);
        jobs.emplace_back(layout_of(candidates_[*j]), 0);
      }
    }
    CENSUS_TRY(run_stages(jobs));
    LayoutResult r = result_of(layout, cand.memory_bound);
    CENSUS_TRY(evaluate(r, o_.gpu_memory));
    if (r.simulated && r.peak_bytes <= o_.gpu_memory) {
      ++counts_.fit;
      result.top.push_back(std::move(r));
    } else {
      ++counts_.rejected_memory_simulated;
    }
  }
  // What never left the line: each shape stands for its variants.
  while (!line.empty()) {
    const auto [seconds, kind, i] = line.top();
    line.pop();
    counts_.not_evaluated += kind == kShape || kind == kFloor ? variants_of(shapes_[i]) : 1;
  }
  counts_.not_evaluated += static_cast<int64_t>(ahead.size());
  if (result.top.empty() && cut_.smallest) {
    // Nothing fits: the smallest peak of any layout, its lower bound ruling out those that cannot be it.
    // Each bound whole: the smallest peak's search stops at the first bound past it. A candidate bounded
    // short of its layers' backwards is bounded again from its states' bound.
    for (Candidate& cand : candidates_)
      if (!cand.activations_bounded || !cand.activations_whole) bound(cand, /*activations=*/true, /*whole=*/true);
    std::vector<bool> expanded(shapes_.size(), false);
    for (const Candidate& cand : candidates_) expanded[static_cast<size_t>(cand.shape)] = true;
    for (size_t i = 0; i < shapes_.size(); ++i) {
      if (expanded[i]) continue;
      for (size_t r = 0; r < recomputes_.size(); ++r)
        for (int z : modes_of(shapes_[i])) {
          Candidate cand;
          cand.shape = static_cast<int32_t>(i), cand.recompute = static_cast<int16_t>(r), cand.zero = static_cast<int8_t>(z);
          bound(cand, /*activations=*/true, /*whole=*/true);
          candidates_.push_back(cand);
        }
    }
    std::vector<size_t> order(candidates_.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return candidates_[a].memory_bound < candidates_[b].memory_bound; });
    // Note [The smallest peak, side by side]
    // Each layout's stage 0 is simulated with those of the next ones in order still below the best peak,
    // one a core (Note [Stages simulated side by side]); a layout whose stage 0 alone passes the best
    // peak cannot hold the smallest, and its other stages are not simulated. The layouts are taken in
    // the same order and the first smallest kept, as one by one.
    std::optional<LayoutResult> best;
    for (size_t k = 0; k < order.size(); ++k) {
      const Candidate& cand = candidates_[order[k]];
      if (best && cand.memory_bound >= best->peak_bytes) break;
      std::vector<std::pair<Layout, int64_t>> jobs;
      if (!simulation(layout_of(cand)).stages[0]) {
        for (size_t n = k; n < order.size() && jobs.size() < cores; ++n) {
          const Candidate& next = candidates_[order[n]];
          if (best && next.memory_bound >= best->peak_bytes) break;
          const Layout layout = layout_of(next);
          if (!simulation(layout).stages[0]) jobs.emplace_back(layout, 0);
        }
      }
      CENSUS_TRY(run_stages(jobs));
      LayoutResult r = result_of(layout_of(cand), cand.memory_bound);
      CENSUS_TRY(evaluate(r, best ? std::optional<int64_t>(best->peak_bytes) : std::nullopt));
      if (r.simulated && (!best || r.peak_bytes < best->peak_bytes)) best = std::move(r);
    }
    result.smallest = std::move(best);
  }
  result.counts = counts_;
  return result;
}

}  // namespace

RunShape plan_run(const PlanOptions& o) {
  RunShape run = o.run;
  if (run.global_batch == 0) run.global_batch = run.gpus;
  run.fp32_master_weights = o.time.fp32_master_weights;
  run.fp32_gradients = o.time.fp32_gradients;
  run.allocator = o.reserved;
  return run;
}

const std::vector<nn::CausalLMLoss>& searched_losses() {
  static const std::vector<nn::CausalLMLoss> losses{nn::CausalLMLoss::kForCausalLM, nn::CausalLMLoss::kTrlChunkedNll,
                                                    nn::CausalLMLoss::kLigerFlce, nn::CausalLMLoss::kTorchtuneChunked,
                                                    nn::CausalLMLoss::kTorchtuneLinear};
  return losses;
}

const std::vector<StepOptimizer>& searched_optimizers() {
  static const std::vector<StepOptimizer> optimizers{StepOptimizer::kAdamW, StepOptimizer::kAdamW8bit,
                                                     StepOptimizer::kPagedAdamW8bit, StepOptimizer::kTorchaoAdamW8bit,
                                                     StepOptimizer::kTorchaoAdamW4bit};
  return optimizers;
}

namespace {

// One plan of the run as given (its loss and optimizer), each result told which it ran.
Result<PlanResult> plan_one(const ModelConfig& config, PlanOptions o, SearchCut cut = {}) {
  Planner planner(config, o, cut);
  auto result = planner.run();
  CENSUS_TRY(result);
  PlanResult r = result.take();
  auto tag = [&](LayoutResult& l) { l.optimizer = o.run.optimizer, l.loss = o.run.loss; };
  for (LayoutResult& l : r.top) tag(l);
  if (r.smallest) tag(*r.smallest);
  if (r.named) tag(*r.named);
  return r;
}

// Whether census step takes the loss and the optimizer on the model at all (one device, no mode beside
// them): Liger's loss on a model type it does not patch, torchtune's on transformed logits, are not.
bool step_takes_run(const ModelConfig& config, const RunShape& run) {
  return check_step_options(config, layout_step_options(Layout{}, run, 0)).ok();
}

}  // namespace

Result<PlanResult> census_plan(const ModelConfig& config, const PlanOptions& options) {
  CENSUS_TRY(check_plan_options(config, options));
  PlanOptions o = options;
  o.run = plan_run(options);
  if (o.search_losses.empty() && o.search_optimizers.empty()) return plan_one(config, o);
  // Note [The search over losses and optimizers]
  // Each combination is a plan of its own (its pruning rules and bounds are its own); their layouts
  // that fit are ranked together by the estimate, equals in the order searched_losses and
  // searched_optimizers list them (hf and AdamW first); the counts add up; where none fits, the
  // smallest peak of any. Once --top layouts fit, a later combination's plan looks only for layouts
  // faster than the slowest of them: its line is taken best first, and what is left when its fastest
  // entry (a lower bound of all the rest) is no faster is not evaluated. Only where nothing of the
  // earlier combinations fits does a plan look for its smallest peak. The result is the one plan of
  // every combination's layouts would print.
  const std::vector<nn::CausalLMLoss> losses = o.search_losses.empty() ? std::vector{o.run.loss} : o.search_losses;
  const std::vector<StepOptimizer> optimizers =
      o.search_optimizers.empty() ? std::vector{o.run.optimizer} : o.search_optimizers;
  PlanResult merged;
  std::map<std::string, int64_t> pruned;
  bool any = false;
  for (const nn::CausalLMLoss loss : losses) {
    for (const StepOptimizer optimizer : optimizers) {
      PlanOptions each = o;
      each.run.loss = loss;
      each.run.optimizer = optimizer;
      if (optimizer_forms(optimizer).empty()) each.run.optimizer_impl = default_optimizer_impl(optimizer);
      if (!step_takes_run(config, each.run)) continue;
      SearchCut cut;
      if (static_cast<int64_t>(merged.top.size()) >= o.top) cut.faster_than = merged.top[static_cast<size_t>(o.top) - 1].time.seconds;
      cut.smallest = merged.top.empty();
      auto result = plan_one(config, each, cut);
      CENSUS_TRY(result);
      PlanResult r = result.take();
      any = true;
      merged.budget_bytes = r.budget_bytes;
      for (LayoutResult& l : r.top) merged.top.push_back(std::move(l));
      std::stable_sort(merged.top.begin(), merged.top.end(),
                       [](const LayoutResult& a, const LayoutResult& b) { return a.time.seconds < b.time.seconds; });
      if (r.smallest && (!merged.smallest || r.smallest->peak_bytes < merged.smallest->peak_bytes))
        merged.smallest = std::move(r.smallest);
      for (const auto& [rule, count] : r.pruned_by_rule) pruned[rule] += count;
      PlanCounts& c = merged.counts;
      c.tried += r.counts.tried, c.pruned_divisibility += r.counts.pruned_divisibility;
      c.estimated += r.counts.estimated, c.rejected_memory_bound += r.counts.rejected_memory_bound;
      c.rejected_memory_simulated += r.counts.rejected_memory_simulated, c.fit += r.counts.fit;
      c.not_evaluated += r.counts.not_evaluated, c.simulations += r.counts.simulations;
      c.stage_runs += r.counts.stage_runs;
    }
  }
  if (!any) return refuse("--search", "census step takes none of the searched losses and optimizers on this model");
  // The layouts past the top count were fits the others outranked: not evaluated, as in one plan.
  if (static_cast<int64_t>(merged.top.size()) > o.top) {
    merged.counts.not_evaluated += static_cast<int64_t>(merged.top.size()) - o.top;
    merged.counts.fit -= static_cast<int64_t>(merged.top.size()) - o.top;
    merged.top.resize(static_cast<size_t>(o.top));
  }
  if (!merged.top.empty()) merged.smallest.reset();
  merged.pruned_by_rule.assign(pruned.begin(), pruned.end());
  return merged;
}

}  // namespace census
