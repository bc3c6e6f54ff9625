#include "plan/plan_time.h"
#include "models/causal_lm.h"
#include "step/fsdp.h"
#include "util/parallel.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <set>

namespace census {

std::string overlap_name(Overlap o) {
  switch (o) {
    case Overlap::kFsdpPrefetch: return "fsdp_prefetch";
    case Overlap::kTpAsync: return "tp_async";
    case Overlap::kEp1F1B: return "ep_1f1b";
    case Overlap::kDpReduceScatter: return "dp_reduce_scatter";
    case Overlap::kCount: break;
  }
  return "?";
}

Result<Overlaps> parse_overlaps(const std::string& text) {
  Overlaps out;
  out.on.fill(false);
  if (text == "none") return out;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string name = text.substr(at, comma - at);
    at = comma + 1;
    bool known = false;
    for (size_t i = 0; i < kOverlaps; ++i)
      if (name == overlap_name(static_cast<Overlap>(i))) out.on[i] = known = true;
    if (!known)
      return refuse("--overlap", echoed(name) +
                                     " is not an overlap switch; use fsdp_prefetch, tp_async, ep_1f1b, dp_reduce_scatter "
                                     "(comma-separated), or none");
  }
  return out;
}

std::string overlaps_text(const Overlaps& o) {
  std::string text;
  for (size_t i = 0; i < kOverlaps; ++i)
    if (o.on[i]) text += (text.empty() ? "" : ",") + overlap_name(static_cast<Overlap>(i));
  return text.empty() ? "none" : text;
}

namespace {

constexpr int64_t kBf16 = 2;

// One layer's ops' times at a layout's (TP, EP, CP, b), what it holds and whether it rings or routes.
struct LayerCost {
  PassTime pass;
  bool attention_kernel = false;
  bool moe = false;
  // As the step builds them, an EP rank's: its num_experts / EP experts (what moves and updates).
  int64_t parameters = 0, expert_parameters = 0;
  int64_t untrained_parameters = 0;  // Note [Parameters no gradient reaches] (plan/plan_cost.cpp)
};

// One micro-batch's pass through a chunk, by term, and each overlap's alternative.
struct ChunkTimes {
  double forward = 0, backward = 0, recompute = 0, output = 0;
  double tp = 0, cp = 0, ep = 0, fsdp = 0;  // exposed, as the switches are set
  std::array<double, kOverlaps> hidden{};    // what each switch hides (on) or would hide (off)
  double forward_pass = 0, backward_pass = 0;  // the pass durations the pipeline runs
};

// Two streams, compute and communication, over a chunk's layers in the order they run: a layer's compute
// waits for its gather; a gather is issued, with prefetch, when the layer before starts computing (else
// when it ends); a reduce-scatter is issued when its layer's compute ends, so it queues behind the next
// layer's gather already issued (FSDP2's order). The time the communication stream adds to the compute.
double fsdp_exposed(const std::vector<double>& compute, const std::vector<double>& gather,
                    const std::vector<double>& reduce, bool prefetch) {
  double comm_free = 0, compute_free = 0, previous_start = 0, total = 0;
  double pending = 0, pending_ready = 0;  // the last layer's reduce-scatter, not yet on the stream
  for (size_t k = 0; k < compute.size(); ++k) {
    const double issue = k == 0 ? 0 : prefetch ? previous_start : compute_free;
    const double gathered = std::max(comm_free, issue) + gather[k];
    comm_free = gathered;
    if (pending > 0) comm_free = std::max(comm_free, pending_ready) + pending;
    const double start = std::max(compute_free, gathered);
    compute_free = start + compute[k];
    previous_start = start;
    total += compute[k];
    pending = reduce.empty() ? 0 : reduce[k];
    pending_ready = compute_free;
  }
  if (pending > 0) comm_free = std::max(comm_free, pending_ready) + pending;
  return std::max(compute_free, comm_free) - total;
}

// The EP group: TP x EP consecutive ranks at stride TP, or (whole experts) EP consecutive ones; and the
// experts' data-parallel group, the ranks holding the same experts (at stride TP x EP, or EP).
Group expert_group(const Layout& l, int64_t gpn) {
  const int64_t stride = l.etp == 1 ? 1 : l.tp;
  return Group{l.ep, std::max<int64_t>(1, std::min(l.ep, gpn / stride))};
}
Group expert_data_group(const Layout& l, int64_t gpn) {
  const int64_t n = expert_ranks(l) / l.ep, stride = (l.etp == 1 ? 1 : l.tp) * l.ep;
  return Group{n, std::max<int64_t>(1, std::min(n, gpn / stride))};
}

std::string seconds_text(double s) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, s >= 1 ? "%.2f s" : "%.2f ms", s >= 1 ? s : s * 1e3);
  return buffer;
}

}  // namespace

// Note [Layers priced through the stack]
// A layer that cannot run alone (Family::stack_only: DeepSeek-V4's, which take the model's hc_mult
// residual streams and input_ids; Gemma 4's KV-shared ones, which attend with the keys and values an
// earlier layer computed) has no lone census to time. Where a model has one, every layer's ops,
// parameters and selective shares are read off the model's own forward (record_stack,
// census_stack_recomputed), the one the step runs: one run per (TP, EP, ETP, tokens), each layer its own
// record (layers of one kind need not be alike there: a KV-shared layer computes no keys or values).
// Where a layer can also run alone, the stack's record of it is the lone census's, op for op
// (tests/plan/plan_cost_test.cpp), so both ways give one answer. Where the family's layers are alike by
// kind (DeepSeek-V4's: Family::stack_layers_alike_by_kind), the forward runs only as far as each kind's
// first layer, which every later layer of its kind is read as (record_stack, census_stack_recomputed;
// tests/plan/plan_stack_cost_test.cpp holds both equal to the whole forward's). What the model computes
// around its layers (DeepSeek-V4's streams and hc_head) is left out of the layers' time, as for every
// model.
struct TimeModel::Impl {
  Impl(const ModelConfig& config, const RunShape& run, const Device& device, TimeOptions options)
      : c(config), run(run), tuned(layout_step_options(Layout{}, run, 0)), o(options), rates(Rates::of(device)),
        net(Network::of(device)) {
    const std::vector<std::string> layer_kind_names = layer_kinds(c);
    for (size_t i = 0; i < layer_kind_names.size(); ++i) {
      const auto named = std::find(kind_names.begin(), kind_names.end(), layer_kind_names[i]);
      kind_index.push_back(static_cast<int32_t>(named - kind_names.begin()));
      if (named == kind_names.end()) kind_names.push_back(layer_kind_names[i]);
      size_t first = i;
      for (size_t j = 0; j < i; ++j)
        if (layer_kind_names[j] == layer_kind_names[i]) {
          first = j;
          break;
        }
      representative.push_back(static_cast<int64_t>(first));
    }
    // Note [Layers priced through the stack]
    for (int64_t i = 0; i < c.num_hidden_layers && c.family->stack_only != nullptr; ++i)
      stacked = stacked || c.family->stack_only(c, i) != nullptr;
    if (stacked)  // each layer its own record, as the model's forward ran it
      for (size_t i = 0; i < representative.size(); ++i) representative[i] = static_cast<int64_t>(i);
    for (int64_t rep : representative) {
      auto found = std::find(priced.begin(), priced.end(), rep);
      cost_index.push_back(static_cast<int32_t>(found - priced.begin()));
      if (found == priced.end()) priced.push_back(rep);
    }
  }

  // The rank's layers as census step builds them (rank_config of the layout's step): at (TP, EP, ETP), or
  // under sequence parallelism DTensor's plan's, keyed by ETP kDTensorPlan (rank_key).
  static constexpr int64_t kDTensorPlan = -1;
  static int64_t rank_key(const Layout& l) { return l.sp ? kDTensorPlan : l.etp; }
  // The ranks a layer's tokens are sharded over, as record_layer takes them: under DTensor's plan with
  // sequence parallelism the TP degree (its norms and residual adds on S / T).
  static int64_t sequence_shards(int64_t tp, int64_t etp) { return etp == kDTensorPlan ? tp : 1; }
  const ModelConfig& rank_config(int64_t tp, int64_t ep, int64_t etp) {
    auto [it, made] = ranks.try_emplace({tp, ep, etp});
    if (made) {
      Layout l;
      l.tp = tp, l.ep = ep, l.etp = etp == kDTensorPlan ? 0 : etp, l.sp = etp == kDTensorPlan;
      it->second = census::rank_config(c, layout_step_options(l, run, 0));
    }
    return it->second;
  }

  // Layer `rep`'s recorded forward at (TP, EP, ETP) on `tokens` tokens: the lone layer's census, or the
  // stack's (Note [Layers priced through the stack]).
  const LayerOps& layer_ops(const ModelConfig& rank, int64_t rep, int64_t tp, int64_t ep, int64_t etp, int64_t tokens) {
    // The policy's shares are of matmuls whose FLOPs all grow with the tokens: read once per (TP, EP, ETP).
    if (stacked) {
      auto [s, new_shares] = stack_shares.try_emplace({tp, ep, etp});
      if (new_shares) s->second = census_stack_recomputed(c, rank, tokens);
      auto [it, made] = stack_ops.try_emplace({tp, ep, etp, tokens});
      if (made) it->second = record_stack(c, rank, tokens, s->second, /*whole=*/false, sequence_shards(tp, etp), tuned);
      return it->second[static_cast<size_t>(rep)];
    }
    auto [s, new_shares] = shares.try_emplace({rep, tp, ep, etp});
    if (new_shares) s->second = census_recomputed(rank, rep, tokens);
    auto [it, made] = ops.try_emplace({rep, tp, ep, etp, tokens});
    if (made) it->second = record_layer(rank, rep, tokens, s->second, sequence_shards(tp, etp), tuned);
    return it->second;
  }

  LayerCost cost_of(const LayerOps& layer, int64_t cp, int64_t b) const {
    LayerCost cost;
    cost.pass = pass_time(layer, b, rates, cp);
    cost.attention_kernel = layer.attention_kernel;
    cost.moe = layer.expert_parameters > 0;
    cost.parameters = layer.parameters;
    cost.expert_parameters = layer.expert_parameters;
    cost.untrained_parameters = layer.untrained_parameters;
    return cost;
  }

  // The costs at (TP, EP, CP, b) of the layers `priced`, each kind's once (each layer's, where the stack
  // records them): layer i's is at cost_index[i].
  const std::vector<LayerCost>& layer_costs(int64_t tp, int64_t ep, int64_t etp, int64_t cp, int64_t b) {
    auto [it, made] = costs.try_emplace({tp, ep, etp, cp, b});
    if (!made) return it->second;
    const ModelConfig& rank = rank_config(tp, ep, etp);
    const int64_t tokens = run.seq_length / cp;
    it->second.reserve(priced.size());
    for (int64_t rep : priced) it->second.push_back(cost_of(layer_ops(rank, rep, tp, ep, etp, tokens), cp, b));
    return it->second;
  }

  // The embedding's and the output layer's; under DTensor's plan (`vocab_shards` T) each of them the
  // rank's V / T rows, as census step builds its vocabulary-parallel embedding and head.
  std::pair<PassTime, PassTime> ends(int64_t cp, int64_t b, int64_t vocab_shards) {
    auto [it, made] = end_costs.try_emplace({cp, b, vocab_shards});
    if (made) {
      const int64_t tokens = run.seq_length / cp;
      ModelConfig shard = c;
      shard.vocab_size = c.vocab_size / vocab_shards;
      it->second = {pass_time(record_embedding(shard, tokens, tuned), b, rates),
                    pass_time(record_output(shard, tokens, tuned), b, rates)};
    }
    return it->second;
  }

  // The chunks' layers of a layout's pipeline, by (PP, V, split).
  const std::vector<LayerRange>& chunks_of(const Layout& l) {
    const PipelineSplit& sp = l.split;
    auto [it, made] = chunk_ranges.try_emplace(std::tuple{l.pp, l.virtual_stages, sp.first_stage_layers, sp.last_stage_layers,
                                                          sp.embedding_as_layer, sp.loss_as_layer});
    if (made) {
      auto chunks = pipeline_chunks(c.num_hidden_layers, l.pp, l.virtual_stages, l.split);
      if (chunks) it->second = chunks.take();
    }
    return it->second;
  }
  struct StepEnd {
    double reduce = 0, overlapped = 0, gather = 0, dp = 0, optimizer = 0;
  };
  // The bytes a gradient is reduced in, a parameter each: a composed step's --grad-dtype, or FSDP2's
  // reduce dtype, its policy's as the layout's step sets it (plan/plan_layout.cpp: mixed precision
  // under fp32 master weights; census step refuses fp32 gradients beside FSDP2).
  int64_t gradient_size(const Layout& l) const {
    if (!l.fsdp) return o.fp32_gradients ? 4 : 2;
    FsdpPolicy policy;
    policy.mixed_precision = o.fp32_master_weights;
    return element_size(policy.reduce_dtype());
  }
  void work(const Layout& l);
  // `least`: as if the backward were long enough to hide all but the last bucket of the reduction.
  StepEnd step_end(const Layout& l, bool least = false) const;
  double shape_bound(Layout l);
  double shape_floor(const Layout& l);
  void record_ahead(const std::vector<Layout>& layouts);
  void record_layers_ahead(const std::vector<Layout>& layouts);
  // A (TP, EP, ETP, CP) whose costs are to be made, and the micro-batch sizes they are made at.
  using CostJob = std::pair<std::tuple<int64_t, int64_t, int64_t, int64_t>, std::vector<int64_t>>;
  // The costs `layouts` read and no entry holds yet, their entries made empty for one job each to fill
  // (the threads write nothing else); each layout's rank config made, for the threads to read.
  std::vector<CostJob> cost_jobs(const std::vector<Layout>& layouts);
  TimeEstimate estimate(const Layout& l, bool complete, bool formulas);

  // The last work() made: every stage's sums, the pass durations, the parameters.
  struct Work {
    PipelineTimes times;
    std::vector<ChunkTimes> stage_sum;
    std::vector<int64_t> stage_params, stage_experts, stage_layers;  // parameters as the step builds an EP rank's
    std::vector<int64_t> stage_trained;  // of them, those a gradient reaches (the optimizer's, under fine-tuning)
    std::vector<int64_t> stage_saved;    // and under adapters, modules_to_save's copies (in the base's dtype)
    std::vector<int64_t> stage_largest_layer;  // the most parameters one decoder layer of the stage holds
    std::vector<ChunkParameters> chunk_params;  // by chunk
    std::vector<double> fwd, bwd, gather, reduce;
    std::vector<Recompute> modes;                              // by kind (kind_names)
    std::vector<std::pair<double, double>> shard_collectives;  // by priced layer: gather, reduce (-1: not yet)
    size_t busiest = 0, heaviest = 0;
    bool valid = false;
    int sharded = 0;  // parameters gathered every pass: 1 ZeRO-3, 2 FSDP2 (its reduce-scatters in its policy's dtype)
    Layout layout;  // whose work it is
  } w;
  static bool same_work(const Layout& a, const Layout& b) {
    return a.tp == b.tp && a.sp == b.sp && a.cp == b.cp && a.ep == b.ep && a.etp == b.etp && a.pp == b.pp && a.dp == b.dp &&
           a.schedule == b.schedule &&
           a.virtual_stages == b.virtual_stages && a.split == b.split && a.micro_batch_size == b.micro_batch_size &&
           a.micro_batches == b.micro_batches && a.recompute == b.recompute;
  }
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, bool, bool>, std::vector<LayerRange>> chunk_ranges;

  const ModelConfig& c;
  RunShape run;
  // The run's fine-tuning, which every record is made under (Note [A fine-tuned layer's record],
  // plan/plan_cost.cpp).
  StepOptions tuned;
  TimeOptions o;
  Rates rates;
  Network net;
  std::vector<std::string> kind_names;  // each kind once, in the model's order
  std::vector<int32_t> kind_index;      // by layer index: its kind's place in kind_names
  std::vector<int64_t> representative;  // by layer index: the first layer of its kind (itself, stacked)
  std::vector<int64_t> priced;          // the layers costs are made for: each representative once
  std::vector<int32_t> cost_index;      // by layer index: its representative's place in `priced`
  bool stacked = false;                 // a layer cannot run alone: every layer priced through the stack
  std::map<std::tuple<int64_t, int64_t, int64_t>, std::vector<RecomputeShares>> stack_shares;  // (TP, EP, ETP)
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t>, std::vector<LayerOps>> stack_ops;   // and tokens
  std::map<std::tuple<int64_t, int64_t, int64_t>, ModelConfig> ranks;
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t>, RecomputeShares> shares;  // by (layer, TP, EP, ETP)
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>, LayerOps> ops;    // and tokens
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>, std::vector<LayerCost>> costs;  // (TP, EP, ETP, CP, b)
  std::map<std::tuple<int64_t, int64_t, int64_t>, std::pair<PassTime, PassTime>> end_costs;  // (CP, b, vocab shards)
  std::map<std::string, PipelineRun> pipelines;
  // Every pass's work of one micro-batch, all layers and both ends: by (TP, EP, ETP, CP, b).
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>, double> pass_sums;
};

// Every stage's work for one micro-batch, by term, and each chunk's pass durations.
void TimeModel::Impl::work(const Layout& l) {
  // The ZeRO stages of a layout share their work, but ZeRO-3's (and FSDP's) gathers.
  const int sharded = l.fsdp ? 2 : l.zero == 3 ? 1 : 0;
  if (w.valid && w.sharded == sharded && same_work(w.layout, l)) return;
  w.valid = true;
  w.sharded = sharded;
  w.layout = l;
  const std::vector<LayerCost>& layers = layer_costs(l.tp, l.ep, rank_key(l), l.cp, l.micro_batch_size);
  const int64_t vocab_shards = l.sp ? l.tp : 1;  // DTensor's plan: the vocabulary-parallel embedding and head
  const auto [embedding, output] = ends(l.cp, l.micro_batch_size, vocab_shards);
  const ModelConfig& rank = rank_config(l.tp, l.ep, rank_key(l));
  const int64_t gpn = run.gpus_per_node;
  const int64_t tokens = run.seq_length / l.cp, b = l.micro_batch_size;
  const int64_t hidden_bytes = b * tokens * c.hidden_size * kBf16;
  const bool sharded_passes = l.zero == 3 || l.fsdp;  // parameters gathered every pass
  const int64_t grad_size = gradient_size(l);
  const int64_t dp_cp = l.dp * l.cp;
  // Ranks TP innermost, then CP, DP (EP within DP x CP, or TP x DP x CP), PP: a group of n ranks at
  // stride s shares a node with max(1, min(n, gpus_per_node / s)) of its members.
  auto group = [&](int64_t n, int64_t stride) { return Group{n, std::max<int64_t>(1, std::min(n, gpn / stride))}; };
  const Group tp_group = group(l.tp, 1), cp_group = group(l.cp, l.tp), dp_group = group(dp_cp, l.tp);
  const Group ep_group = expert_group(l, gpn), edp_group = expert_data_group(l, gpn);
  const bool pp_inside = l.tp * l.cp * l.dp * l.pp <= gpn;
  // Each of TP's collectives: an all-reduce of the hidden states, or under sequence parallelism the
  // all-gather or reduce-scatter pair that stands for one (its two halves, the same bytes on the ring).
  const double tp_collective = l.tp == 1 ? 0
                               : l.sp    ? 2 * all_gather_seconds(hidden_bytes, tp_group, net)
                                         : all_reduce_seconds(hidden_bytes, tp_group, net);
  const int64_t ring_kv = b * tokens * 2 * rank.num_key_value_heads * rank.head_dim * kBf16;
  const double ring_send = send_seconds(ring_kv, cp_group.inside_node(), net);
  const double ring_send_back = send_seconds(2 * ring_kv, cp_group.inside_node(), net);
  const int64_t routed_bytes = b * tokens * c.moe.num_experts_per_tok * c.hidden_size * kBf16;
  const double a2a = l.ep > 1 ? all_to_all_seconds(routed_bytes, ep_group, net) : 0;

  const std::vector<LayerRange>& chunks = chunks_of(l);
  const int64_t p = l.pp, v = l.virtual_stages;
  // Each kind's recompute mode, and each priced layer's gather and reduce under sharded passes, once.
  std::vector<Recompute>& modes = w.modes;
  modes.clear();
  for (const std::string& kind : kind_names) modes.push_back(l.recompute.of_kind(kind));
  std::vector<std::pair<double, double>>& shard_collectives = w.shard_collectives;
  shard_collectives.assign(layers.size(), {-1, -1});
  PipelineTimes& times = w.times;
  times.forward.assign(static_cast<size_t>(p), std::vector<double>(static_cast<size_t>(v), 0));
  times.backward = times.forward;
  times.transfer = p > 1 ? send_seconds(hidden_bytes, pp_inside, net) : 0;
  std::vector<ChunkTimes>& stage_sum = w.stage_sum;
  stage_sum.assign(static_cast<size_t>(p), ChunkTimes{});
  std::vector<int64_t>& stage_params = w.stage_params;
  std::vector<int64_t>& stage_experts = w.stage_experts;
  std::vector<int64_t>& stage_layers = w.stage_layers;
  stage_params.assign(static_cast<size_t>(p), 0);
  stage_experts.assign(static_cast<size_t>(p), 0);
  w.stage_trained.assign(static_cast<size_t>(p), 0);
  w.stage_saved.assign(static_cast<size_t>(p), 0);
  stage_layers.assign(static_cast<size_t>(p), 0);
  w.stage_largest_layer.assign(static_cast<size_t>(p), 0);
  w.chunk_params.assign(chunks.size(), ChunkParameters{});
  const bool async = o.overlaps[Overlap::kTpAsync], prefetch = o.overlaps[Overlap::kFsdpPrefetch];
  const bool ep_paired = o.overlaps[Overlap::kEp1F1B];
  for (int64_t g = 0; g < static_cast<int64_t>(chunks.size()); ++g) {
    const int64_t r = g % p, chunk = g / p;
    const bool first = g == 0, last = g + 1 == static_cast<int64_t>(chunks.size());
    ChunkTimes t;
    double tp_f_raw = 0, tp_b_raw = 0, tp_f_async = 0, tp_b_async = 0, ep_f = 0, ep_b = 0, cp_f = 0, cp_b = 0;
    std::vector<double>& fwd = w.fwd;
    std::vector<double>& bwd = w.bwd;
    std::vector<double>& gather = w.gather;
    std::vector<double>& reduce = w.reduce;
    fwd.clear(), bwd.clear(), gather.clear(), reduce.clear();
    for (int64_t i = chunks[static_cast<size_t>(g)].begin; i < chunks[static_cast<size_t>(g)].end; ++i) {
      const LayerCost& lc = layers[static_cast<size_t>(cost_index[static_cast<size_t>(i)])];
      const PassTime& pt = lc.pass;
      const Recompute mode = modes[static_cast<size_t>(kind_index[static_cast<size_t>(i)])];
      const bool full = mode == Recompute::kFull;
      t.forward += pt.forward;
      t.backward += pt.backward;
      t.recompute += full ? pt.forward : mode == Recompute::kSelective ? pt.selective_recompute : 0;
      // TP: 2 all-reduces each way (and the recomputed forward's again under full recompute).
      const double passes_b = full ? 2 : 1;
      tp_f_raw += 2 * tp_collective;
      tp_b_raw += 2 * tp_collective * passes_b;
      tp_f_async += std::max(0.0, 2 * tp_collective - pt.gemm_forward);
      tp_b_async += std::max(0.0, 2 * tp_collective * passes_b - pt.gemm_backward - (full ? pt.gemm_forward : 0));
      if (l.cp > 1 && lc.attention_kernel) {
        const double steps = static_cast<double>(l.cp - 1), share = static_cast<double>(l.cp);
        const double ring_f = steps * std::max(0.0, ring_send - pt.attention_forward / share);
        cp_f += ring_f;
        cp_b += ring_f * (full ? 1 : 0) + steps * std::max(0.0, ring_send_back - pt.attention_backward / share);
      }
      if (lc.moe && l.ep > 1) {
        ep_f += 2 * a2a;
        ep_b += 2 * a2a * passes_b;
      }
      if (sharded_passes) {
        auto& [gathered, reduced] = shard_collectives[static_cast<size_t>(cost_index[static_cast<size_t>(i)])];
        if (gathered < 0) {
          const int64_t dense = lc.parameters - lc.expert_parameters;
          gathered = all_gather_seconds(dense * kBf16, dp_group, net) +
                     all_gather_seconds(lc.expert_parameters * kBf16, edp_group, net);
          reduced = all_gather_seconds(dense * grad_size, dp_group, net) +
                    all_gather_seconds(lc.expert_parameters * grad_size, edp_group, net);
        }
        gather.push_back(gathered);
        reduce.push_back(reduced);
        fwd.push_back(pt.forward);
        bwd.push_back(pt.backward + (full ? pt.forward : mode == Recompute::kSelective ? pt.selective_recompute : 0));
      }
      stage_params[static_cast<size_t>(r)] += lc.parameters;
      stage_experts[static_cast<size_t>(r)] += lc.expert_parameters;
      w.stage_trained[static_cast<size_t>(r)] += lc.parameters - lc.untrained_parameters;
      ChunkParameters& held = w.chunk_params[static_cast<size_t>(g)];
      held.all += lc.parameters, held.experts += lc.expert_parameters, held.untrained += lc.untrained_parameters;
      ++stage_layers[static_cast<size_t>(r)];
      w.stage_largest_layer[static_cast<size_t>(r)] = std::max(w.stage_largest_layer[static_cast<size_t>(r)], lc.parameters);
    }
    t.cp = cp_f + cp_b;
    t.tp = async ? tp_f_async + tp_b_async : tp_f_raw + tp_b_raw;
    t.hidden[static_cast<size_t>(Overlap::kTpAsync)] = tp_f_raw + tp_b_raw - tp_f_async - tp_b_async;
    // Forward and backward of a chunk are each other's partners in 1F1B's steady state.
    const double ep_f_paired = std::max(0.0, ep_f - (t.backward + t.recompute));
    const double ep_b_paired = std::max(0.0, ep_b - t.forward);
    t.ep = ep_paired ? ep_f_paired + ep_b_paired : ep_f + ep_b;
    t.hidden[static_cast<size_t>(Overlap::kEp1F1B)] = ep_f + ep_b - ep_f_paired - ep_b_paired;
    double fsdp_f = 0, fsdp_b = 0;
    if (sharded_passes && !fwd.empty()) {
      fsdp_f = fsdp_exposed(fwd, gather, {}, prefetch);
      std::reverse(bwd.begin(), bwd.end());
      std::reverse(gather.begin(), gather.end());
      std::reverse(reduce.begin(), reduce.end());
      fsdp_b = fsdp_exposed(bwd, gather, reduce, prefetch);
      const double serial = fsdp_exposed(fwd, gather, {}, false) + fsdp_exposed(bwd, gather, reduce, false);
      t.hidden[static_cast<size_t>(Overlap::kFsdpPrefetch)] =
          prefetch ? serial - fsdp_f - fsdp_b
                   : serial - fsdp_exposed(fwd, gather, {}, true) - fsdp_exposed(bwd, gather, reduce, true);
      t.fsdp = fsdp_f + fsdp_b;
    }
    double forward_extra = 0, backward_extra = 0;
    const int64_t stage_before = stage_params[static_cast<size_t>(r)];
    // The embedding, the head and the final norm train but under adapters, where they are frozen; there
    // modules_to_save trains copies of the embedding and the head (stage_saved).
    const auto saved = [&](const char* module) { return run.lora && run.lora->saves(module) ? 1 : 0; };
    const int64_t table = c.vocab_size / vocab_shards * c.hidden_size;
    int64_t ends = 0, copies = 0;
    if (first) {
      t.forward += embedding.forward;
      t.backward += embedding.backward;
      ends += table;
      copies += saved("embed_tokens") * table;
    }
    if (last) {
      t.output = output.forward + output.backward;
      forward_extra += output.forward;
      backward_extra += output.backward;
      if (!(first && c.tie_word_embeddings)) {
        ends += table;
        copies += saved("lm_head") * table;
      }
      ends += c.hidden_size;
    }
    stage_params[static_cast<size_t>(r)] += ends;
    w.chunk_params[static_cast<size_t>(g)].all += stage_params[static_cast<size_t>(r)] - stage_before;
    if (!run.lora) w.stage_trained[static_cast<size_t>(r)] += ends;
    w.stage_saved[static_cast<size_t>(r)] += copies;
    t.forward_pass = t.forward + forward_extra + (async ? tp_f_async : tp_f_raw) + (ep_paired ? ep_f_paired : ep_f) + fsdp_f + cp_f;
    t.backward_pass = t.backward + backward_extra + t.recompute + (async ? tp_b_async : tp_b_raw) +
                      (ep_paired ? ep_b_paired : ep_b) + fsdp_b + cp_b;
    times.forward[static_cast<size_t>(r)][static_cast<size_t>(chunk)] = t.forward_pass;
    times.backward[static_cast<size_t>(r)][static_cast<size_t>(chunk)] = t.backward_pass;
    ChunkTimes& s = stage_sum[static_cast<size_t>(r)];
    s.forward += t.forward, s.backward += t.backward, s.recompute += t.recompute, s.output += t.output;
    s.tp += t.tp, s.cp += t.cp, s.ep += t.ep, s.fsdp += t.fsdp;
    s.forward_pass += t.forward_pass, s.backward_pass += t.backward_pass;
    for (size_t k = 0; k < kOverlaps; ++k) s.hidden[k] += t.hidden[k];
  }
  w.busiest = w.heaviest = 0;
  for (size_t r = 0; r < stage_sum.size(); ++r) {
    const double busy = stage_sum[r].forward_pass + stage_sum[r].backward_pass;
    if (busy > stage_sum[w.busiest].forward_pass + stage_sum[w.busiest].backward_pass) w.busiest = r;
    if (stage_params[r] > stage_params[w.heaviest]) w.heaviest = r;
  }
}

// Once a step: the gradients' reduction and (ZeRO-1/2) the parameters' gather, on the stage holding the
// most parameters; then the optimizer's step there. ZeRO-3 and FSDP reduce every pass instead.
TimeModel::Impl::StepEnd TimeModel::Impl::step_end(const Layout& l, bool least) const {
  const bool sharded_passes = l.zero == 3 || l.fsdp;
  const int64_t grad_size = gradient_size(l);
  const int64_t dp_cp = l.dp * l.cp, gpn = run.gpus_per_node;
  const Group dp_group{dp_cp, std::max<int64_t>(1, std::min(dp_cp, gpn / l.tp))};
  const Group edp_group = expert_data_group(l, gpn);
  const int64_t params = w.stage_params[w.heaviest], experts = w.stage_experts[w.heaviest], dense = params - experts;
  StepEnd end;
  if (!sharded_passes) {
    if (l.zero == 0) {
      end.reduce = all_reduce_seconds(dense * grad_size, dp_group, net) + all_reduce_seconds(experts * grad_size, edp_group, net);
    } else {
      end.reduce = all_gather_seconds(dense * grad_size, dp_group, net) + all_gather_seconds(experts * grad_size, edp_group, net);
      end.gather = all_gather_seconds(dense * kBf16, dp_group, net) + all_gather_seconds(experts * kBf16, edp_group, net);
    }
  }
  double window = least ? std::numeric_limits<double>::infinity() : 0;  // least: the whole reduction overlapped
  for (double d : w.times.backward[w.heaviest]) window += d;
  const double last_bucket = end.reduce / static_cast<double>(std::max<int64_t>(1, w.stage_layers[w.heaviest]));
  end.overlapped = std::min(end.reduce, std::max(0.0, end.reduce - window) + last_bucket);
  end.dp = (o.overlaps[Overlap::kDpReduceScatter] ? end.overlapped : end.reduce) + end.gather;
  const double d = static_cast<double>(dp_cp);
  const bool sharded = l.zero > 0 || l.fsdp;
  const double p_share = l.zero >= 3 || l.fsdp ? 1 / d : 1, g_share = l.zero >= 2 || l.fsdp ? 1 / d : 1,
               s_share = sharded ? 1 / d : 1;
  // AdamW reads and writes each parameter and its states, and reads its gradient. The parameters are
  // bf16 beside states of bf16 moments (4 B) or of an fp32 master and fp32 moments (12 B), except under
  // FSDP2 with fp32 master weights, whose fp32 shards are their own master: fp32 parameters beside fp32
  // moments (8 B), 28 B a parameter in all where ZeRO's fp32 masters move 32.
  const bool own_master = l.fsdp && o.fp32_master_weights;
  const double param_size = own_master ? 4 : kBf16;
  // Another optimizer reads and writes its states' least bytes (least_state_bytes: a paged one's counted as
  // on the device, Adafactor's factored ones as nothing; Muon's Newton-Schulz matmuls are not counted, and
  // census plan refuses it).
  const double state_size = run.optimizer == StepOptimizer::kAdamW
                                ? (o.fp32_master_weights ? (own_master ? 8 : 12) : 4)
                                : static_cast<double>(least_state_bytes(run.optimizer));
  const auto n = static_cast<double>(params);
  double optimizer_bytes = run.optimizer == StepOptimizer::kNone
                               ? 0
                               : 2 * param_size * n * p_share + static_cast<double>(grad_size) * n * g_share +
                                     2 * state_size * n * s_share;
  // Fine-tuning (one device, unsharded): the optimizer steps the parameters a gradient reaches alone, the
  // adapters under LoRA, in their dtype (fp32 ones, or a model loaded in fp32 for autocast): the parameter
  // and its gradient in it, AdamW's two moments in it too.
  if (run.fine_tuning() && run.optimizer != StepOptimizer::kNone) {
    // Each parameter read and written, its gradient read, its states read and written, in its dtype.
    const auto bytes = [&](double size, int64_t count) {
      const double states = run.optimizer == StepOptimizer::kAdamW ? 2 * size : static_cast<double>(least_state_bytes(run.optimizer));
      return (3 * size + 2 * states) * static_cast<double>(count);
    };
    // The base's dtype (fp32 where loaded so, or cast by prepare_model_for_kbit_training), which
    // modules_to_save's copies keep; the adapters' own.
    const double base = tuned.fp32_weights() || (run.quantize && run.quantize->prepare_kbit) ? 4.0 : static_cast<double>(kBf16);
    const double trained = run.lora ? static_cast<double>(element_size(run.lora->dtype)) : base;
    optimizer_bytes = bytes(trained, w.stage_trained[w.heaviest]) + bytes(base, w.stage_saved[w.heaviest]);
  }
  end.optimizer = optimizer_bytes / (rates.hbm_bytes_per_s * rates.calibration.memory_efficiency);
  return end;
}

double TimeModel::Impl::shape_bound(Layout l) {
  // Recompute adds to every backward and ZeRO-3's gathers to every pass: the plain, unsharded work is
  // the least; each ZeRO stage's end (ZeRO-3's its optimizer step alone) the least of them.
  l.recompute = {};
  l.fsdp = false;
  l.zero = 0;
  work(l);
  const double busy = static_cast<double>(l.micro_batches) *
                      (w.stage_sum[w.busiest].forward_pass + w.stage_sum[w.busiest].backward_pass);
  double least = std::numeric_limits<double>::infinity();
  for (int zero = 0; zero <= (l.dp * l.cp > 1 ? 3 : 0); ++zero) {
    l.zero = zero;
    const StepEnd end = step_end(l, /*least=*/true);
    least = std::min(least, end.dp + end.optimizer);
  }
  return busy + least;
}

// Note [The shape's floor]
// shape_bound runs through every stage's layers; the search has hundreds of thousands of shapes on
// 16,384 GPUs and refines only those near the front of its line. Their floor: the busiest stage's
// forward and backward passes are each at least their layers' compute and the ends' (every other term
// is a time of its own, none below 0), and the busiest stage holds at least a P-th of the whole (the
// stages share out every layer and both ends), so M x the whole pass work / P, with no step end. The sum
// is taken in another order than the stages' sums, so it is lowered by a part in 10^9, far more than any
// rounding of at most a few hundred positive terms. The search ranks a shape by it until it nears the
// front (Note [Shapes bounded at the front of the line], plan/plan.cpp); tests/plan/
// plan_time_floor_test.cpp holds it below shape_bound on every shape of whole searches.
double TimeModel::Impl::shape_floor(const Layout& l) {
  // The rank's layers and ends as shape_bound takes them (under sequence parallelism DTensor's plan's
  // layers and the vocabulary-parallel ends: rank_key, V / T).
  auto [it, made] = pass_sums.try_emplace({l.tp, l.ep, rank_key(l), l.cp, l.micro_batch_size});
  if (made) {
    const auto [embedding, output] = ends(l.cp, l.micro_batch_size, l.sp ? l.tp : 1);
    double sum = embedding.forward + embedding.backward + output.forward + output.backward;
    const std::vector<LayerCost>& layers = layer_costs(l.tp, l.ep, rank_key(l), l.cp, l.micro_batch_size);
    for (int32_t k : cost_index) sum += layers[static_cast<size_t>(k)].pass.forward + layers[static_cast<size_t>(k)].pass.backward;
    it->second = sum;
  }
  return static_cast<double>(l.micro_batches) * it->second / static_cast<double>(l.pp) * (1 - 1e-9);
}

TimeEstimate TimeModel::Impl::estimate(const Layout& l, bool complete, bool formulas) {
  work(l);
  const size_t busiest = w.busiest;
  const int64_t p = l.pp, v = l.virtual_stages, b = l.micro_batch_size, tokens = run.seq_length / l.cp;
  const double m = static_cast<double>(l.micro_batches);
  const bool sharded_passes = l.zero == 3 || l.fsdp;
  TimeEstimate e;
  e.complete = complete;
  e.busiest_stage = static_cast<int64_t>(busiest);
  e.stage_parameters = w.stage_params;
  e.stage_largest_layer_parameters = w.stage_largest_layer;
  e.chunk_parameters = w.chunk_params;
  const ChunkTimes& s = w.stage_sum[busiest];
  const double busy = m * (s.forward_pass + s.backward_pass);
  double bubble = 0;
  if (complete && p > 1) {
    char key[160];
    std::snprintf(key, sizeof key, "%lld/%lld/%lld/%lld/%d/%lld/%lld/%lld/%d/%d/%d", static_cast<long long>(l.tp),
                  static_cast<long long>(l.cp), static_cast<long long>(l.ep), static_cast<long long>(l.pp),
                  static_cast<int>(l.schedule), static_cast<long long>(l.virtual_stages),
                  static_cast<long long>(l.micro_batch_size), static_cast<long long>(l.micro_batches),
                  static_cast<int>(l.split.first_stage_layers * 1000 + l.split.last_stage_layers),
                  (l.split.embedding_as_layer ? 1 : 0) + (l.split.loss_as_layer ? 2 : 0), l.fsdp ? 2 : sharded_passes ? 1 : 0);
    const std::string full_key =
        std::string(key) + "/" + std::to_string(rank_key(l)) + "/" + std::to_string(l.dp) + "/" + recompute_text(l.recompute);
    auto found = pipelines.find(full_key);
    if (found == pipelines.end())
      found = pipelines.emplace(full_key, simulate_pipeline(l.schedule, p, l.micro_batches, v, w.times)).first;
    bubble = std::max(0.0, found->second.makespan - busy);
  }

  const StepEnd end = step_end(l);
  const double dp = end.dp, optimizer = end.optimizer;
  const int64_t dp_cp = l.dp * l.cp, edp = expert_ranks(l) / l.ep;
  const int64_t experts = w.stage_experts[w.heaviest];
  const ModelConfig& rank = rank_config(l.tp, l.ep, rank_key(l));
  const int64_t ring_kv = b * tokens * 2 * rank.num_key_value_heads * rank.head_dim * kBf16;
  const int64_t routed_bytes = b * tokens * c.moe.num_experts_per_tok * c.hidden_size * kBf16;
  const bool ep_inside = expert_group(l, run.gpus_per_node).inside_node();
  for (size_t k = 0; k < kOverlaps; ++k) e.overlap_seconds[k] = m * s.hidden[k];
  e.overlap_seconds[static_cast<size_t>(Overlap::kDpReduceScatter)] = end.reduce - end.overlapped;
  // The pipeline's hidden-state sends lie on its critical path (the bubble), not in a stage's work.
  const double seconds[] = {m * s.forward, m * s.backward, m * s.recompute, m * s.output, m * s.tp, m * s.cp,
                            m * s.ep,      m * s.fsdp,     bubble,          dp,           optimizer};
  for (double term : seconds) e.seconds += term;
  if (!complete) return e;  // a bound: its sum alone
  e.terms = {
      {"forward", m * s.forward, ""},
      {"backward", m * s.backward, ""},
      {"recompute", m * s.recompute, ""},
      {"output_layer", m * s.output, ""},
      {"tp_communication", m * s.tp, ""},
      {"cp_communication", m * s.cp, ""},
      {"ep_communication", m * s.ep, ""},
      {"fsdp_communication", m * s.fsdp, ""},
      {"pipeline_bubble", bubble, ""},
      {"dp_communication", dp, ""},
      {"optimizer_step", optimizer, ""},
  };
  if (!formulas) return e;

  const std::string S = std::to_string(b) + " x " + std::to_string(tokens);
  const std::string M = "M " + std::to_string(l.micro_batches);
  auto on = [&](Overlap ov) { return o.overlaps[ov] ? std::string(" (") + overlap_name(ov) + " on: hides " : std::string(" (") + overlap_name(ov) + " off: would hide "; };
  auto hidden_text = [&](Overlap ov) { return on(ov) + seconds_text(e.overlap_seconds[static_cast<size_t>(ov)]) + ")"; };
  e.terms[0].formula = M + " x stage " + std::to_string(busiest) +
                       "'s layers, op by op: GEMMs (F + W½) / (peak x gemm_efficiency), the attention kernel's causal FLOPs at "
                       "its rate, the rest bytes / (HBM x memory_efficiency); the embedding on stage 0";
  e.terms[1].formula = "each GEMM's GEMMs of its FLOPs, one per operand that requires grad (two; a frozen weight's "
                       "one), the attention kernel's 2.5 x FLOPs at its backward rate, every other op's bytes twice";
  e.terms[2].formula = "by layer kind (" + recompute_text(l.recompute) +
                       "): full runs the forward again, selective its policy's share of the matmuls and the weightless ops";
  e.terms[3].formula = l.sp ? "the last stage's final norm, LM head (its V / " + std::to_string(l.tp) +
                                   " rows) and vocabulary-parallel loss, forward and backward"
                             : "the last stage's final norm, LM head and loss, forward and backward";
  e.terms[4].formula = l.tp == 1 ? "TP 1"
                       : l.sp    ? "per layer 2 + 2 all-gather and reduce-scatter pairs (sequence parallelism) of " + S +
                                    " x " + std::to_string(c.hidden_size) + " x 2 B over TP " + std::to_string(l.tp) +
                                    hidden_text(Overlap::kTpAsync)
                                 : "per layer 2 + 2 all-reduces of " + S + " x " + std::to_string(c.hidden_size) +
                                       " x 2 B over TP " + std::to_string(l.tp) + hidden_text(Overlap::kTpAsync);
  e.terms[5].formula = l.cp > 1 ? "per attention layer C - 1 = " + std::to_string(l.cp - 1) + " ring steps of " +
                                      std::to_string(ring_kv) + " B (K/V), twice backward, beyond each step's attention"
                                : "CP 1";
  e.terms[6].formula = l.ep > 1 ? "per MoE layer 2 + 2 all-to-alls of " + std::to_string(routed_bytes) + " B over EP " +
                                      std::to_string(l.ep) + (ep_inside ? " inside a node" : " across nodes") +
                                      hidden_text(Overlap::kEp1F1B)
                                : "EP 1";
  e.terms[7].formula = sharded_passes ? "each layer's parameters gathered forward and backward, its gradients reduce-scattered, "
                                        "over DP x CP = " + std::to_string(dp_cp) + hidden_text(Overlap::kFsdpPrefetch)
                                      : "parameters whole on the rank";
  e.terms[8].formula = p > 1 ? "the " + schedule_label(l) + " order simulated, each pass as long as its terms, " +
                                   seconds_text(w.times.transfer) + " a send between stages, less stage " +
                                   std::to_string(busiest) + "'s work"
                             : "no pipeline";
  e.terms[9].formula = sharded_passes ? "(every pass's, above)"
                       : l.zero == 0
                           ? "all-reduce of the gradients over DP x CP = " + std::to_string(dp_cp) +
                                 (experts > 0 ? " (experts' over " + std::to_string(edp) + ")" : "") +
                                 hidden_text(Overlap::kDpReduceScatter)
                           : "reduce-scatter of the gradients, all-gather of the parameters over DP x CP = " +
                                 std::to_string(dp_cp) + hidden_text(Overlap::kDpReduceScatter);
  e.terms[10].formula = run.fine_tuning()
                            ? "the parameters a gradient reaches (the adapters under LoRA), their gradients and states, "
                              "read and written in their dtype / (HBM x memory_efficiency)"
                            : "parameters, gradients and states read and written at the rank's shares / (HBM x memory_efficiency)";
  return e;
}

TimeModel::TimeModel(const ModelConfig& config, const RunShape& run, const Device& device, TimeOptions options)
    : impl_(std::make_unique<Impl>(config, run, device, options)) {}

TimeModel::~TimeModel() = default;

double TimeModel::shape_bound(const Layout& layout) { return impl_->shape_bound(layout); }

double TimeModel::shape_floor(const Layout& layout) { return impl_->shape_floor(layout); }

void TimeModel::record_ahead(const std::vector<Layout>& layouts) { impl_->record_ahead(layouts); }

std::vector<TimeModel::Impl::CostJob> TimeModel::Impl::cost_jobs(const std::vector<Layout>& layouts) {
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t>, std::vector<int64_t>> sizes_by_key;
  for (const Layout& l : layouts) {
    const int64_t etp = rank_key(l);
    rank_config(l.tp, l.ep, etp);  // made here: the threads only read it
    std::vector<int64_t>& sizes = sizes_by_key[{l.tp, l.ep, etp, l.cp}];
    if (costs.find({l.tp, l.ep, etp, l.cp, l.micro_batch_size}) == costs.end() &&
        std::find(sizes.begin(), sizes.end(), l.micro_batch_size) == sizes.end())
      sizes.push_back(l.micro_batch_size);
  }
  std::vector<CostJob> jobs;
  for (auto& [key, sizes] : sizes_by_key)
    if (!sizes.empty()) jobs.emplace_back(key, std::move(sizes));
  for (const auto& [key, sizes] : jobs)  // each job writes its own entries, made before the threads start
    for (int64_t b : sizes) costs.try_emplace(std::tuple_cat(key, std::tuple{b}));
  return jobs;
}

// Note [Stack records made ahead]
// The search bounds every shape first, which reads the model's forward at each (TP, EP, ETP, tokens)
// its shapes reach: for a model priced through the stack, one forward each (as far as each kind's first
// layer, where its layers are alike by kind), independent of one another. They are made here, one a
// core, and priced into the entries layer_costs would make one by one (each layer by the same cost_of;
// a layer read as an earlier one, with the same shares, at that one's cost); the records themselves are
// not kept. The selective shares of
// each (TP, EP, ETP) are read at the tokens layer_ops would read them at (those of the first layout
// reaching it, in the order given, which is the order the search bounds them in).
void TimeModel::Impl::record_ahead(const std::vector<Layout>& layouts) {
  if (!stacked) return record_layers_ahead(layouts);
  std::vector<std::pair<std::tuple<int64_t, int64_t, int64_t>, int64_t>> share_jobs;  // (TP, EP, ETP), tokens
  for (const Layout& l : layouts) {
    const int64_t etp = rank_key(l);
    if (stack_shares.find({l.tp, l.ep, etp}) == stack_shares.end() &&
        std::none_of(share_jobs.begin(), share_jobs.end(), [&](const auto& job) { return job.first == std::tuple{l.tp, l.ep, etp}; }))
      share_jobs.emplace_back(std::tuple{l.tp, l.ep, etp}, run.seq_length / l.cp);
  }
  const std::vector<CostJob> record_jobs = cost_jobs(layouts);
  for (const auto& [key, tokens] : share_jobs) stack_shares.try_emplace(key);  // each job writes its own
  run_in_parallel(share_jobs.size(), [&](size_t i) {
    const auto& [key, tokens] = share_jobs[i];
    stack_shares.find(key)->second = census_stack_recomputed(c, ranks.find(key)->second, tokens);
  });
  // Each forward's record is priced at every micro-batch size its layouts take, then let go: the costs
  // are all the estimates read (layer_costs), and a model's records at every (TP, EP, ETP, tokens) at
  // once would take more memory than the search.
  // A layer read as an earlier one (its kind's first, where the family's layers are alike by kind) has
  // that layer's ops and parameters (record_stack); with its shares the same, its cost is that layer's.
  const std::vector<int64_t> read_as = layers_read_as(c, /*whole=*/false);
  run_in_parallel(record_jobs.size(), [&](size_t i) {
    const auto& [key, sizes] = record_jobs[i];
    const auto& [tp, ep, etp, cp] = key;
    const std::tuple rank_key{tp, ep, etp};
    const std::vector<LayerOps> layers = record_stack_as_read(c, ranks.find(rank_key)->second, run.seq_length / cp,
                                                              stack_shares.find(rank_key)->second, read_as,
                                                              sequence_shards(tp, etp), tuned);
    for (int64_t b : sizes) {
      std::vector<LayerCost>& out = costs.find(std::tuple{tp, ep, etp, cp, b})->second;
      for (size_t k = 0; k < layers.size(); ++k) {
        const size_t as = static_cast<size_t>(read_as[k]);
        const RecomputeShares &mine = layers[k].shares, &theirs = layers[as].shares;
        if (as == k) {
          out.push_back(cost_of(layers[k], cp, b));
        } else if (mine.attention_mm == theirs.attention_mm && mine.ffn_mm == theirs.ffn_mm) {
          const LayerCost cost = out[as];
          out.push_back(cost);
        } else {  // record_stack's record of it: the earlier layer's with its own shares
          LayerOps own = layers[as];
          own.shares = mine;
          out.push_back(cost_of(own, cp, b));
        }
      }
    }
  });
}

// Note [Layer records made ahead]
// Where every layer runs alone, the search's first pass (every shape's floor) reads each kind's lone
// census at every (TP, EP, ETP, tokens) its shapes reach, one after another: thousands of records on a
// large search (a Qwen3.5-397B plan on 16,384 GPUs made 1,704), each a layer's forward. They are
// independent of one another, so they are made here, one job a core for each (TP, EP, ETP, CP), and
// priced into the entries layer_costs would make one by one (each kind's record by the same cost_of, at
// every micro-batch size the layouts take); the records themselves are not kept. Each kind's selective
// shares at (TP, EP, ETP) are read at the tokens layer_ops would read them at: those of the first layout
// reaching it, in the order given, which is the order the search floors the shapes in.
// tests/plan/plan_stack_cost_test.cpp holds every estimate equal, term by term, to those made one by one.
void TimeModel::Impl::record_layers_ahead(const std::vector<Layout>& layouts) {
  using ShareKey = std::tuple<int64_t, int64_t, int64_t, int64_t>;  // (layer, TP, EP, ETP)
  std::vector<std::pair<ShareKey, int64_t>> share_jobs;            // and the tokens it is read at
  std::set<ShareKey> share_queued;
  for (const Layout& l : layouts)
    for (int64_t rep : priced) {
      const ShareKey key{rep, l.tp, l.ep, rank_key(l)};
      if (shares.find(key) == shares.end() && share_queued.insert(key).second)
        share_jobs.emplace_back(key, run.seq_length / l.cp);
    }
  const std::vector<CostJob> record_jobs = cost_jobs(layouts);
  for (const auto& [key, tokens] : share_jobs) shares.try_emplace(key);  // each job writes its own
  run_in_parallel(share_jobs.size(), [&](size_t i) {
    const auto& [key, tokens] = share_jobs[i];
    const auto& [rep, tp, ep, etp] = key;
    shares.find(key)->second = census_recomputed(ranks.find({tp, ep, etp})->second, rep, tokens);
  });
  run_in_parallel(record_jobs.size(), [&](size_t i) {
    const auto& [key, sizes] = record_jobs[i];
    const auto& [tp, ep, etp, cp] = key;
    const ModelConfig& rank = ranks.find({tp, ep, etp})->second;
    for (int64_t rep : priced) {  // in `priced`'s order, each entry's costs
      const LayerOps layer = record_layer(rank, rep, run.seq_length / cp, shares.find({rep, tp, ep, etp})->second,
                                          sequence_shards(tp, etp), tuned);
      for (int64_t b : sizes) costs.find(std::tuple{tp, ep, etp, cp, b})->second.push_back(cost_of(layer, cp, b));
    }
  });
}

TimeEstimate TimeModel::estimate(const Layout& layout, bool complete, bool formulas) {
  return impl_->estimate(layout, complete, formulas);
}

}  // namespace census
