#include "plan/plan.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <thread>
#include <tuple>

#include "census/parts.h"
#include "plan/plan_cost.h"

namespace census {

std::string schedule_name(PipelineSchedule s) {
  switch (s) {
    case PipelineSchedule::kGPipe: return "gpipe";
    case PipelineSchedule::kInterleaved: return "interleaved";
    case PipelineSchedule::k1F1B: break;
  }
  return "1f1b";
}

std::string recompute_name(Recompute r) {
  switch (r) {
    case Recompute::kSelective: return "selective";
    case Recompute::kFull: return "full";
    case Recompute::kNone: break;
  }
  return "none";
}

Status check_plan_options(const ModelConfig& config, const PlanOptions& o) {
  if (o.gpus < 1) return refuse("--gpus", std::to_string(o.gpus) + " is not a number of devices; give 1 or more");
  constexpr int64_t kMostDevices = 1 << 20, kMostSequences = 1 << 24;
  if (o.gpus > kMostDevices)
    return refuse("--gpus", std::to_string(o.gpus) + " is more devices than a run has; give at most " +
                                std::to_string(kMostDevices));
  if (o.global_batch > kMostSequences)
    return refuse("--global-batch", std::to_string(o.global_batch) + " sequences is more than a step takes; give at most " +
                                        std::to_string(kMostSequences));
  if (o.gpus_per_node < 1) return refuse("--gpus-per-node", "must be 1 or more");
  if (o.gpu_memory < 1) return refuse("--gpu-memory", "must be a positive size, such as 80GiB");
  for (const auto& [flag, value] : {std::pair{"--cuda-context", o.cuda_context}, std::pair{"--nccl-buffers", o.nccl_buffers},
                                    std::pair{"--fragmentation", o.fragmentation}})
    if (value < 0) return refuse(flag, "is negative; give 0 or more bytes");
  const int64_t overheads = o.cuda_context + o.nccl_buffers + o.fragmentation;
  if (overheads >= o.gpu_memory)
    return refuse("--gpu-memory", std::to_string(o.gpu_memory) + " bytes leave nothing after the overheads (" +
                                      std::to_string(overheads) + " bytes); give more memory or smaller overheads");
  if (o.seq_length < 1) return refuse("--seq-length", "must be at least 1");
  if (o.global_batch < 0) return refuse("--global-batch", "must be a positive number of sequences");
  if (o.top < 1) return refuse("--top", "must be 1 or more");
  if (!(o.compute_efficiency > 0 && o.compute_efficiency <= 1))
    return refuse("--compute-efficiency", "must be above 0 and at most 1");
  for (const auto& [flag, value] : {std::pair{"--peak-tflops", o.device.peak_tflops}, std::pair{"--hbm-gbs", o.device.hbm_gbs},
                                    std::pair{"--link-gbs", o.device.link_gbs}, std::pair{"--nic-gbs", o.device.nic_gbs}})
    if (!(value > 0)) return refuse(flag, "must be a positive figure; give it, or a --device preset");
  // The time model prices each layer by its own census; a layer that runs only inside its model's
  // forward (DeepSeek-V4's, Gemma 4's KV-shared ones) has none.
  for (int64_t i = 0; i < config.num_hidden_layers && config.family->stack_only != nullptr; ++i)
    if (const char* why = config.family->stack_only(config, i))
      return refuse("census plan on " + config.model_type,
                    "layer " + std::to_string(i) + " cannot be timed alone (" + why +
                        "), and the plan's time model times each layer alone; run census step on the layout instead");
  StepOptions probe;
  probe.seq_length = o.seq_length;
  return check_step_options(config, probe);
}

namespace {

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

// Why a TP degree cannot split the layers (empty: it can), as tp_config splits them.
std::string tp_refusal(const ModelConfig& c, int64_t tp) {
  if (c.num_key_value_heads % tp != 0 && tp % c.num_key_value_heads != 0) return "TP does not divide the KV heads";
  for (const TpDividedField& field : tp_divided_fields()) {
    const int64_t size = field.get(c);
    if (size <= 0 || std::string_view(field.name) == "num_key_value_heads") continue;
    if (size % tp != 0) return std::string("TP does not divide ") + field.name;
  }
  return {};
}

// The EP degrees of a model: the divisors of its experts that divide N (each one a candidate the
// rules below then prune), or 1 alone where the model has no experts or census step does not shard
// them (eager experts).
std::vector<int64_t> ep_degrees(const ModelConfig& c, int64_t n) {
  if (c.moe.num_experts == 0 || c.moe.experts_implementation != nn::ExpertsImplementation::kGroupedMm) return {1};
  std::vector<int64_t> out;
  for (int64_t e : divisors(c.moe.num_experts))
    if (n % e == 0) out.push_back(e);
  return out;
}

struct SimKey {
  int64_t tp, cp, ep, pp, v;
  PipelineSchedule schedule;
  Recompute recompute;
  auto tie() const { return std::tie(tp, cp, ep, pp, v, schedule, recompute); }
  bool operator<(const SimKey& o) const { return tie() < o.tie(); }
  bool operator==(const SimKey& o) const { return tie() == o.tie(); }
};

SimKey key_of(const Layout& l) { return {l.tp, l.cp, l.ep, l.pp, l.virtual_stages, l.schedule, l.recompute}; }

// One (TP, CP, EP, PP, schedule, V, recompute), simulated stage by stage as the search needs them: each
// stage's composed peak by ZeRO stage.
struct Simulation {
  std::vector<std::optional<std::vector<StepMoment>>> stages;  // [stage][zero]
};

struct Candidate {
  LayoutResult result;
  size_t zero_index = 0;  // into the simulation's by_zero
};

class Planner {
 public:
  Planner(const ModelConfig& config, const PlanOptions& options) : c_(config), o_(options) {
    throughput_.flops_per_s = o_.device.peak_tflops * 1e12 * o_.compute_efficiency;
    throughput_.hbm_bytes_per_s = o_.device.hbm_gbs * 1e9;
  }
  Result<PlanResult> run();

 private:
  struct TpCosts {
    ModelConfig rank;
    std::vector<ForwardTime> layers;            // by layer index
    std::vector<int64_t> layer_parameters;      // by layer index: parameters
    std::vector<int64_t> layer_expert_parameters;
  };
  // A layer's costs at the rank's TP, its S / CP tokens and its experts' EP share.
  const TpCosts& costs(const Layout& l);
  const ForwardTime& output_time(int64_t cp);
  void enumerate(std::vector<Candidate>& out, PlanResult& result);
  void estimate(LayoutResult& r);
  // The simulation of `l`'s (TP, CP, EP, PP, schedule, V, recompute), made empty where there is none yet.
  Simulation& simulation(const Layout& l);
  // The (layout, stage) steps not simulated yet, run on as many threads as there are cores.
  Status run_stages(const std::vector<std::pair<Layout, int64_t>>& jobs);
  int64_t overheads() const { return o_.cuda_context + o_.nccl_buffers + o_.fragmentation; }
  // ZeRO shards over the ranks that hold the same parameters, DP x CP (as census step composes it).
  std::vector<int> zeros_of(int64_t dp_cp) const { return dp_cp > 1 ? std::vector<int>{0, 1, 2, 3} : std::vector<int>{0}; }
  StepComposition composition(const Layout& l, int zero) const {
    StepComposition c;
    c.data_parallel = l.dp;
    c.context_parallel = l.cp;
    c.zero = zero;
    c.fp32_master_weights = o_.fp32_master_weights;
    c.fp32_gradients = o_.fp32_gradients;
    c.cuda_context = o_.cuda_context;
    c.nccl_buffers = o_.nccl_buffers;
    c.fragmentation = o_.fragmentation;
    return c;
  }
  // The layers stage `stage` holds: chunk v has layers [(v P + r) L/(P V), +L/(P V)).
  std::vector<int64_t> stage_layers(const Layout& l, int64_t stage) const {
    std::vector<int64_t> out;
    const int64_t per_chunk = c_.num_hidden_layers / (l.pp * l.virtual_stages);
    for (int64_t v = 0; v < l.virtual_stages; ++v)
      for (int64_t i = 0; i < per_chunk; ++i) out.push_back((v * l.pp + stage) * per_chunk + i);
    return out;
  }
  double bandwidth(int64_t span) const {
    return (span <= o_.gpus_per_node ? o_.device.link_gbs : o_.device.nic_gbs) * 1e9;
  }

  const ModelConfig& c_;
  const PlanOptions& o_;
  Throughput throughput_;
  std::map<std::tuple<int64_t, int64_t, int64_t>, TpCosts> costs_;  // by (TP, CP, EP)
  std::map<int64_t, ForwardTime> outputs_;                         // by CP
  std::map<SimKey, Simulation> simulations_;
  PlanCounts counts_;
};

const Planner::TpCosts& Planner::costs(const Layout& l) {
  const auto key = std::tuple{l.tp, l.cp, l.ep};
  auto found = costs_.find(key);
  if (found != costs_.end()) return found->second;
  TpCosts t;
  t.rank = tp_config(c_, l.tp);
  t.rank.moe.expert_parallel = l.ep;  // as census step builds the rank's experts
  std::map<std::string, size_t> by_kind;  // a layer kind's costs are the same at every index
  for (int64_t i = 0; i < c_.num_hidden_layers; ++i) {
    const std::string kind = layer_kind(c_, i);
    const auto known = by_kind.find(kind);
    if (known != by_kind.end()) {
      t.layers.push_back(t.layers[known->second]);
      t.layer_parameters.push_back(t.layer_parameters[known->second]);
      t.layer_expert_parameters.push_back(t.layer_expert_parameters[known->second]);
      continue;
    }
    by_kind[kind] = t.layers.size();
    t.layers.push_back(layer_forward_time(t.rank, i, o_.seq_length / l.cp, throughput_, l.cp));
    int64_t all = 0, experts = 0;
    for (const auto& [part, count] : census_parameters(t.rank, i).parts) {
      all += count;
      if (part == "routed") experts += count;
    }
    t.layer_parameters.push_back(all);
    t.layer_expert_parameters.push_back(experts);
  }
  return costs_.emplace(key, std::move(t)).first->second;
}

const ForwardTime& Planner::output_time(int64_t cp) {
  auto found = outputs_.find(cp);
  if (found == outputs_.end()) found = outputs_.emplace(cp, output_forward_time(c_, o_.seq_length / cp, throughput_)).first;
  return found->second;
}

void Planner::enumerate(std::vector<Candidate>& out, PlanResult& result) {
  std::map<std::string, int64_t> pruned;
  const int64_t n = o_.gpus, layers = c_.num_hidden_layers;
  const int64_t batch = o_.global_batch > 0 ? o_.global_batch : n;
  const std::vector<int64_t> eps = ep_degrees(c_, n);
  for (int64_t tp : divisors(n))
    for (int64_t cp : divisors(n / tp))
      for (int64_t pp : divisors(n / tp / cp))
        for (int64_t ep : eps) {
          const int64_t dp = n / tp / cp / pp;
          // The schedules: none without a pipeline; 1F1B, GPipe and interleaved over each V that
          // divides the stage's layers.
          std::vector<std::pair<PipelineSchedule, int64_t>> shapes = {{PipelineSchedule::k1F1B, 1}};
          if (pp > 1) {
            shapes.push_back({PipelineSchedule::kGPipe, 1});
            if (layers % pp == 0) {
              for (int64_t v : divisors(layers / pp))
                if (v > 1) shapes.push_back({PipelineSchedule::kInterleaved, v});
            } else {
              shapes.push_back({PipelineSchedule::kInterleaved, 2});
            }
          }
          for (const auto& [schedule, v] : shapes) {
            const int64_t variants = 3 * static_cast<int64_t>(zeros_of(dp * cp).size());
            counts_.tried += variants;
            std::string why;
            if (tp > o_.gpus_per_node) why = "TP spans nodes (TP stays inside a node of " + std::to_string(o_.gpus_per_node) + ")";
            else if (std::string t = tp_refusal(c_, tp); !t.empty()) why = t;
            else if (o_.seq_length % cp != 0) why = "CP does not divide the sequence length";
            // EP takes its ranks from the expert layers' data-parallel ones, DP x CP (Megatron's
            // expert-model-parallel groups inside its data-and-context-parallel group), and stays
            // inside a node with the TP ranks its group spans.
            else if ((dp * cp) % ep != 0) why = "EP does not divide DP x CP";
            else if (tp * ep > o_.gpus_per_node)
              why = "TP x EP spans nodes (EP stays inside a node of " + std::to_string(o_.gpus_per_node) + ")";
            else if (layers % (pp * v) != 0) why = v > 1 ? "PP x V does not divide the layers" : "PP does not divide the layers";
            else if (pipeline_cut_refusal(c_, pp * v)) why = "the model cannot be cut into pipeline stages";
            else if (batch % dp != 0) why = "DP does not divide the global batch";
            else if (schedule == PipelineSchedule::kInterleaved && (batch / dp) % pp != 0)
              why = "interleaved: micro-batches not a multiple of PP";
            if (!why.empty()) {
              pruned[why] += variants;
              counts_.pruned_divisibility += variants;
              continue;
            }
            for (Recompute recompute : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
              const std::vector<int> zeros = zeros_of(dp * cp);
              for (size_t z = 0; z < zeros.size(); ++z) {
                Candidate cand;
                Layout& l = cand.result.layout;
                l.tp = tp, l.cp = cp, l.ep = ep, l.pp = pp, l.dp = dp, l.schedule = schedule, l.virtual_stages = v;
                l.recompute = recompute, l.zero = zeros[z], l.micro_batches = batch / dp;
                cand.zero_index = z;
                estimate(cand.result);
                out.push_back(std::move(cand));
              }
            }
          }
        }
  for (const auto& [rule, count] : pruned) result.pruned_by_rule.emplace_back(rule, count);
}

void Planner::estimate(LayoutResult& r) {
  const Layout& l = r.layout;
  const TpCosts& t = costs(l);
  const ForwardTime& output = output_time(l.cp);
  const int64_t tokens = o_.seq_length / l.cp;  // the rank's share of a sequence
  const double hidden_bytes = static_cast<double>(tokens * c_.hidden_size * 2);
  // Ranks placed TP innermost, then CP, then DP, then PP (Megatron's tp-cp-ep-dp-pp); an EP group
  // takes every TP-th rank of TP x EP consecutive ones.
  const double tp_bw = bandwidth(l.tp), cp_bw = bandwidth(l.tp * l.cp), ep_bw = bandwidth(l.tp * l.ep),
               dp_bw = bandwidth(l.tp * l.cp * l.dp), pp_bw = bandwidth(l.tp * l.cp * l.dp * l.pp);
  const int64_t per_stage = c_.num_hidden_layers / l.pp;
  const double tp_per_layer = 4 * all_reduce_seconds(static_cast<int64_t>(hidden_bytes), l.tp, tp_bw);
  const double p2p = l.pp > 1 ? 2 * hidden_bytes / pp_bw * static_cast<double>(l.virtual_stages) : 0;
  // CP's ring: the forward receives the other C - 1 shards' K/V, one shard a step; the backward
  // passes them round again with their gradients (twice the bytes); a full recompute runs the
  // forward's ring once more.
  const int64_t ring_kv = (l.cp - 1) * tokens * 2 * t.rank.num_key_value_heads * t.rank.head_dim * 2;
  const double ring_passes = l.recompute == Recompute::kFull ? 4 : 3;
  const double cp_per_layer = l.cp > 1 ? ring_passes * static_cast<double>(ring_kv) / cp_bw : 0;
  // EP's all-to-alls, per MoE layer: the forward's dispatch and combine of the rank's tokens' top-k
  // copies of the hidden state, the backward's two of their gradients (and a full recompute's two
  // more), each sending (E-1)/E of them off the rank.
  const int64_t routed_bytes = tokens * c_.moe.num_experts_per_tok * c_.hidden_size * 2;
  const double a2a_passes = l.recompute == Recompute::kFull ? 6 : 4;
  const double ep_per_moe_layer = a2a_passes * all_to_all_seconds(routed_bytes, l.ep, ep_bw);

  // The slowest stage's micro-batch, and the most parameters a stage holds.
  double fwd = 0, bwd = 0, rec = 0, out_fwd = 0, micro = -1;
  int64_t params = 0, experts = 0, moe_layers = 0;
  for (int64_t s = 0; s < l.pp; ++s) {
    double f = 0, sel = 0;
    int64_t p = 0, e = 0, moe = 0;
    for (int64_t i : stage_layers(l, s)) {
      f += t.layers[static_cast<size_t>(i)].seconds;
      sel += t.layers[static_cast<size_t>(i)].selective_recompute_seconds;
      p += t.layer_parameters[static_cast<size_t>(i)];
      e += t.layer_expert_parameters[static_cast<size_t>(i)];
      moe += t.layer_expert_parameters[static_cast<size_t>(i)] > 0 ? 1 : 0;
    }
    if (s == 0) p += c_.vocab_size * c_.hidden_size;
    const double o = s == l.pp - 1 ? output.seconds : 0;
    if (s == l.pp - 1) p += c_.vocab_size * c_.hidden_size + c_.hidden_size;
    const double r_s = l.recompute == Recompute::kFull ? f : l.recompute == Recompute::kSelective ? sel : 0;
    const double m = 3 * (f + o) + r_s;
    if (m > micro) micro = m, fwd = f, bwd = 2 * f, rec = r_s, out_fwd = o, moe_layers = moe;
    if (p > params) params = p, experts = e;
  }
  const double tp_comm = static_cast<double>(per_stage) * tp_per_layer;
  const double cp_comm = static_cast<double>(per_stage) * cp_per_layer;
  const double ep_comm = static_cast<double>(moe_layers) * ep_per_moe_layer;
  const double per_micro = fwd + bwd + rec + 3 * out_fwd + tp_comm + cp_comm + ep_comm + p2p;
  const double m = static_cast<double>(l.micro_batches);
  const double bubble = static_cast<double>(l.pp - 1) / static_cast<double>(l.virtual_stages) * per_micro;

  // The gradient reduction runs over the ranks holding the same parameters: DP x CP for the dense
  // ones, DP x CP / EP for an expert's (its expert-data-parallel group).
  const int64_t dp_cp = l.dp * l.cp, edp = dp_cp / l.ep;
  const int64_t dense = params - experts;
  const int64_t grad_size = o_.fp32_gradients ? 4 : 2;
  const int64_t param_bytes = 2 * params, dense_param_bytes = 2 * dense, expert_param_bytes = 2 * experts;
  const int64_t grad_bytes = grad_size * params, dense_grad_bytes = grad_size * dense, expert_grad_bytes = grad_size * experts;
  const int64_t state_bytes = (o_.fp32_master_weights ? 6 : 2) * param_bytes;  // bf16 moments 4 B; fp32 copy + moments 12 B
  const std::string D = l.cp > 1 ? "(DP x CP)" : "D";
  double dp_comm = 0;
  std::string dp_formula;
  if (l.zero == 0) {
    dp_comm = all_reduce_seconds(dense_grad_bytes, dp_cp, dp_bw) + all_reduce_seconds(expert_grad_bytes, edp, dp_bw);
    dp_formula = "all-reduce of the gradients: 2 (" + D + "-1)/" + D + " x " + std::to_string(dense_grad_bytes) + " B";
    if (experts > 0) dp_formula += " + 2 (E'-1)/E' x " + std::to_string(expert_grad_bytes) + " B of experts' (E' = DP x CP / EP = " + std::to_string(edp) + ")";
    dp_formula += " / bandwidth";
  } else {
    dp_comm = all_gather_seconds(dense_grad_bytes, dp_cp, dp_bw) + all_gather_seconds(dense_param_bytes, dp_cp, dp_bw) +
              all_gather_seconds(expert_grad_bytes, edp, dp_bw) + all_gather_seconds(expert_param_bytes, edp, dp_bw);
    dp_formula = "reduce-scatter of the gradients and all-gather of the parameters: (" + D + "-1)/" + D + " x (" +
                 std::to_string(dense_grad_bytes) + " + " + std::to_string(dense_param_bytes) + ") B";
    if (experts > 0)
      dp_formula += " + (E'-1)/E' x (" + std::to_string(expert_grad_bytes) + " + " + std::to_string(expert_param_bytes) +
                    ") B of experts' (E' = DP x CP / EP = " + std::to_string(edp) + ")";
    dp_formula += " / bandwidth";
    if (l.zero == 3) {
      dp_comm += 2 * m * (all_gather_seconds(dense_param_bytes, dp_cp, dp_bw) + all_gather_seconds(expert_param_bytes, edp, dp_bw));
      dp_formula += "; ZeRO-3: + M x 2 all-gathers of the parameters (forward and backward)";
    }
  }
  const double d = static_cast<double>(dp_cp);
  const double p_share = l.zero >= 3 ? 1 / d : 1, g_share = l.zero >= 2 ? 1 / d : 1, s_share = l.zero >= 1 ? 1 / d : 1;
  const double optimizer_bytes = 2 * param_bytes * p_share + grad_bytes * g_share + 2 * state_bytes * s_share;
  const double optimizer = optimizer_bytes / throughput_.hbm_bytes_per_s;

  // Parameters, gradients and optimizer states are all live at the end of AdamW's step (the experts'
  // counted as parameters alone: an expert no token reached has neither gradient nor state), at the
  // ZeRO shares over DP x CP.
  auto floor_share = [](int64_t bytes, bool shared, int64_t by) { return shared ? bytes / by : bytes; };
  const int64_t margin = 1 << 20;  // each storage's share is rounded down on its own
  r.lower_bound_bytes = std::max<int64_t>(0, floor_share(param_bytes, l.zero >= 3, dp_cp) +
                                                 floor_share(grad_size * dense, l.zero >= 2, dp_cp) +
                                                 floor_share((o_.fp32_master_weights ? 12 : 4) * dense, l.zero >= 1, dp_cp) -
                                                 margin) + overheads();

  const std::string S = std::to_string(tokens);
  r.time = {
      {"forward", m * fwd, "M x the slowest stage's layers: each part max(FLOPs / (peak x efficiency), bytes / HBM)" +
                               std::string(l.cp > 1 ? "; CP: the attention kernel C x the shard's (its S/C queries meet all S keys)" : "")},
      {"backward", m * bwd, "twice the forward (gradients of the inputs and of the weights)"},
      {"recompute", m * rec, l.recompute == Recompute::kFull ? "full: one more forward"
                             : l.recompute == Recompute::kSelective ? "selective: the policy's recomputed share"
                                                                   : "none"},
      {"output_layer", m * 3 * out_fwd, "last stage: final norm, LM head and loss, forward and 2 x backward"},
      {"tp_communication", m * tp_comm,
       "per layer 4 all-reduces of " + S + " x " + std::to_string(c_.hidden_size) + " x 2 B at TP " + std::to_string(l.tp)},
      {"cp_communication", m * cp_comm,
       "per layer " + std::to_string(static_cast<int>(ring_passes)) + " x the ring's K/V, (C-1) x " + S +
           " x 2 x KV heads x head_dim x 2 B = " + std::to_string(ring_kv) + " B at CP " + std::to_string(l.cp) + " / bandwidth"},
      {"ep_communication", m * ep_comm,
       "per MoE layer " + std::to_string(static_cast<int>(a2a_passes)) + " all-to-alls of " + S + " x top-k x " +
           std::to_string(c_.hidden_size) + " x 2 B, (E-1)/E off the rank, at EP " + std::to_string(l.ep)},
      {"pp_communication", m * p2p, "per micro-batch the hidden state on and its gradient back (x V chunks)"},
      {"pipeline_bubble", bubble, "(P-1)/V x a micro-batch's time"},
      {"dp_communication", dp_comm, dp_formula},
      {"optimizer_step", optimizer, "parameters read and written, gradients read, states read and written / HBM"},
  };
  r.step_seconds = 0;
  for (const TimeTerm& term : r.time) r.step_seconds += term.seconds;
}

Simulation& Planner::simulation(const Layout& l) {
  Simulation& sim = simulations_[key_of(l)];
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
    for (const auto& [other, other_stage] : missing) queued = queued || (other_stage == stage && key_of(other) == key_of(layout));
    if (!queued && !simulation(layout).stages[static_cast<size_t>(stage)]) missing.emplace_back(layout, stage);
  }
  if (missing.empty()) return {};
  std::vector<std::optional<Result<StepCensus>>> steps(missing.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < missing.size(); i = next++) {
      const auto& [l, stage] = missing[i];
      StepOptions o;
      o.seq_length = o_.seq_length;
      o.micro_batches = l.micro_batches;
      o.pipeline_stages = l.pp;
      o.stage = stage;
      o.schedule = l.schedule;
      o.virtual_stages = l.virtual_stages;
      o.recompute = l.recompute;
      o.optimizer = StepOptimizer::kAdamW;
      o.tensor_parallel = l.tp;
      o.context_parallel = l.cp;
      o.expert_parallel = l.ep;
      o.composition = composition(l, 0);
      for (int z : zeros_of(l.dp * l.cp)) o.also_composed.push_back(composition(l, z));
      if (o_.reserved) {
        StepAllocatorOptions allocator;
        allocator.conf = o_.alloc_conf;
        allocator.device_total = o_.gpu_memory;
        o.allocator = allocator;
      }
      steps[i].emplace(census_step(c_, o));
    }
  };
  const size_t threads = std::min<size_t>(missing.size(), std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (size_t i = 1; i < threads; ++i) pool.emplace_back(work);
  work();
  for (std::thread& thread : pool) thread.join();
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

Result<PlanResult> Planner::run() {
  PlanResult result;
  result.budget_bytes = o_.gpu_memory - overheads();
  std::vector<Candidate> candidates;
  enumerate(candidates, result);
  if (candidates.empty()) {
    std::string rules;
    for (const auto& [rule, count] : result.pruned_by_rule) rules += (rules.empty() ? "" : "; ") + rule + ": " + std::to_string(count);
    return refuse("--gpus " + std::to_string(o_.gpus), "no layout passes the divisibility rules (" + rules +
                                                          "); give another device count or --global-batch");
  }
  std::stable_sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    return a.result.step_seconds < b.result.step_seconds;
  });
  // The layout's peak: stage 0 first (1F1B's and the interleaved schedule's warm-up keeps the most
  // micro-batches in flight there), and where that alone passes `budget`, rejected on it: the most-
  // loaded stage needs at least as much. Else every stage, and the most-loaded one.
  auto evaluate = [&](Candidate& cand, std::optional<int64_t> budget) -> Status {
    LayoutResult& r = cand.result;
    const int64_t stages = r.layout.pp;
    CENSUS_TRY(run_stages({{r.layout, 0}}));
    const int64_t stage0 = (*simulation(r.layout).stages[0])[cand.zero_index].bytes + overheads();
    r.lower_bound_bytes = std::max(r.lower_bound_bytes, stage0);
    if (budget && stage0 > *budget) {
      r.peak_bytes = stage0;
      return {};
    }
    std::vector<std::pair<Layout, int64_t>> all;
    for (int64_t s = 0; s < stages; ++s) all.emplace_back(r.layout, s);
    CENSUS_TRY(run_stages(all));
    const Simulation& sim = simulation(r.layout);
    r.simulated = true;
    r.stage_bytes.clear();
    for (const auto& stage : sim.stages) r.stage_bytes.push_back((*stage)[cand.zero_index].bytes + overheads());
    r.worst_stage = 0;
    for (size_t s = 1; s < r.stage_bytes.size(); ++s)
      if (r.stage_bytes[s] > r.stage_bytes[static_cast<size_t>(r.worst_stage)]) r.worst_stage = static_cast<int64_t>(s);
    r.peak = (*sim.stages[static_cast<size_t>(r.worst_stage)])[cand.zero_index];
    r.peak_bytes = r.stage_bytes[static_cast<size_t>(r.worst_stage)];
    return {};
  };
  const size_t cores = std::max(1u, std::thread::hardware_concurrency());
  size_t i = 0;
  for (; i < candidates.size() && static_cast<int64_t>(result.top.size()) < o_.top; ++i) {
    Candidate& cand = candidates[i];
    if (cand.result.lower_bound_bytes > o_.gpu_memory) {
      ++counts_.rejected_memory_bound;
      continue;
    }
    // Where this layout's stage 0 is to be simulated: with it, those of the next layouts the search
    // would simulate after it, one a core, together (at most cores - 1 are run in vain at the end).
    std::vector<std::pair<Layout, int64_t>> ahead;
    for (size_t j = i; !simulation(cand.result.layout).stages[0] && j < candidates.size() && ahead.size() < cores; ++j) {
      const Layout& next = candidates[j].result.layout;
      if (candidates[j].result.lower_bound_bytes > o_.gpu_memory || simulation(next).stages[0]) continue;
      bool queued = false;
      for (const auto& [other, stage] : ahead) queued = queued || key_of(other) == key_of(next);
      if (!queued) ahead.emplace_back(next, 0);
    }
    CENSUS_TRY(run_stages(ahead));
    CENSUS_TRY(evaluate(cand, o_.gpu_memory));
    if (cand.result.simulated && cand.result.peak_bytes <= o_.gpu_memory) {
      ++counts_.fit;
      result.top.push_back(cand.result);
    } else {
      ++counts_.rejected_memory_simulated;
    }
  }
  counts_.not_evaluated = static_cast<int64_t>(candidates.size() - i);
  if (result.top.empty() && !candidates.empty()) {
    // Nothing fits: the smallest peak of any layout, its lower bound ruling out those that cannot be it.
    std::stable_sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
      return a.result.lower_bound_bytes < b.result.lower_bound_bytes;
    });
    std::optional<LayoutResult> best;
    for (Candidate& cand : candidates) {
      if (best && cand.result.lower_bound_bytes >= best->peak_bytes) break;
      if (!cand.result.simulated) CENSUS_TRY(evaluate(cand, std::nullopt));
      if (!best || cand.result.peak_bytes < best->peak_bytes) best = cand.result;
    }
    result.smallest = best;
  }
  result.counts = counts_;
  return result;
}

}  // namespace

Result<PlanResult> census_plan(const ModelConfig& config, const PlanOptions& options) {
  CENSUS_TRY(check_plan_options(config, options));
  Planner planner(config, options);
  return planner.run();
}

}  // namespace census
