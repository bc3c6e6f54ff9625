#include "plan/plan_layout.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <tuple>

namespace census {

std::string schedule_name(PipelineSchedule s) {
  switch (s) {
    case PipelineSchedule::kGPipe: return "gpipe";
    case PipelineSchedule::kInterleaved: return "interleaved";
    case PipelineSchedule::k1F1B: break;
  }
  return "1f1b";
}

std::string schedule_label(const Layout& l) {
  if (l.pp == 1) return "none";
  std::string s = schedule_name(l.schedule);
  if (l.schedule == PipelineSchedule::kInterleaved) s += " V" + std::to_string(l.virtual_stages);
  return s;
}

std::string sharding_name(const Layout& l) { return l.fsdp ? "FSDP" : "ZeRO-" + std::to_string(l.zero); }

std::string tensor_parallel_name(const Layout& l) { return std::to_string(l.tp) + (l.sp ? " SP" : ""); }

namespace {

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

}  // namespace

StepOptions layout_step_options(const Layout& l, const RunShape& run, int64_t stage) {
  StepOptions o;
  o.seq_length = run.seq_length;
  o.micro_batch_size = l.micro_batch_size;
  o.micro_batches = l.micro_batches;
  o.pipeline_stages = l.pp;
  o.stage = stage;
  o.schedule = l.schedule;
  o.virtual_stages = l.virtual_stages;
  o.split = l.split;
  o.recompute = l.recompute.all;
  o.recompute_by_kind = l.recompute.by_kind;
  o.recompute_every_nth_layer = l.recompute.every_nth_layer;
  o.optimizer = run.optimizer;
  if (!optimizer_forms(run.optimizer).empty()) o.optimizer_impl = run.optimizer_impl;
  o.first_step = run.first_step;
  o.loss = run.loss;
  o.tensor_parallel = l.tp;
  o.sequence_parallel = o.loss_parallel = l.sp;
  o.context_parallel = l.cp;
  o.expert_parallel = l.ep;
  o.expert_tensor_parallel = l.etp;
  o.composition.data_parallel = l.dp;
  o.composition.context_parallel = l.cp;
  o.composition.zero = l.zero;
  o.composition.fp32_gradients = run.fp32_gradients;
  // As census step --fsdp takes --master-weights: FSDP2's mixed-precision policy in place of composed
  // master weights (step/fsdp.h).
  o.composition.fp32_master_weights = run.fp32_master_weights && !l.fsdp;
  if (l.fsdp) {
    o.fsdp.shards = l.dp;
    o.fsdp.mixed_precision = run.fp32_master_weights;
    o.fsdp.wrap = run.fsdp_wrap;
  }
  if (run.allocator) o.allocator = StepAllocatorOptions{};
  o.lora = run.lora;
  o.quantize = run.quantize;
  o.autocast = run.autocast;
  o.load_dtype = run.load_dtype;
  return o;
}

int64_t least_state_bytes(StepOptimizer optimizer) {
  switch (optimizer) {
    case StepOptimizer::kAdamW: return 4;
    case StepOptimizer::kSGD:
    case StepOptimizer::kAdamW8bit:
    case StepOptimizer::kPagedAdamW8bit:
    case StepOptimizer::kTorchaoAdamW8bit:
    case StepOptimizer::kMuon: return 2;
    case StepOptimizer::kTorchaoAdamW4bit: return 1;
    case StepOptimizer::kAdafactor:
    case StepOptimizer::kNone: return 0;
  }
  return 0;
}

std::string tensor_parallel_rule(const ModelConfig& c, const RunShape& run, int64_t tp) {
  if (tp > run.gpus_per_node) return "TP spans nodes (TP stays inside a node of " + std::to_string(run.gpus_per_node) + ")";
  if (tp > 1 && run.loss != nn::CausalLMLoss::kForCausalLM)
    return "TP beside --loss " + std::string(nn::causal_lm_loss_name(run.loss)) + " (census step refuses it)";
  // Liger's kernels (the config's, census plan's --liger) stand beside no TP or CP in census step.
  if (tp > 1 && c.liger.any()) return "TP beside --liger (census step refuses it)";
  return tp_refusal(c, tp);
}

std::string layout_rule_broken(const ModelConfig& c, const RunShape& run, const Layout& l, std::string* detail) {
  const int64_t batch = run.global_batch;
  if (std::string t = tensor_parallel_rule(c, run, l.tp); !t.empty()) return t;
  if (run.seq_length % l.cp != 0) return "CP does not divide the sequence length";
  if (l.cp > 1 && c.liger.any()) return "CP beside --liger (census step refuses it)";
  if (l.ep > 1 && (c.moe.num_experts == 0 || c.moe.num_experts % l.ep != 0)) return "EP does not divide the experts";
  // EP takes its ranks from the expert layers' data-parallel ones, DP x CP (Megatron's expert-model-
  // parallel groups inside its data-and-context-parallel group), with whole experts TP x DP x CP.
  if (expert_ranks(l) % l.ep != 0) return l.etp == 1 ? "EP does not divide TP x DP x CP" : "EP does not divide DP x CP";
  if (!pipeline_chunks(c.num_hidden_layers, l.pp, l.virtual_stages, l.split))
    return l.virtual_stages > 1 ? "PP x V does not split the layers" : "PP does not split the layers";
  if (batch % l.dp != 0) return "DP does not divide the global batch";
  if ((batch / l.dp) % l.micro_batch_size != 0) return "the micro-batch size does not divide the per-rank batch";
  if (l.schedule == PipelineSchedule::kInterleaved && l.micro_batches % l.pp != 0)
    return "interleaved: micro-batches not a multiple of PP";
  if (l.fsdp && l.zero != 0) return "FSDP shards by itself (zero stays 0)";
  if (l.zero > 0 && l.dp * l.cp == 1) return "ZeRO shards over DP x CP > 1";
  if (l.fsdp && l.dp == 1) return "FSDP shards over DP > 1";
  if (l.sp && l.tp == 1) return "SP shards over TP > 1";
  if (Status step = check_step_options(c, layout_step_options(l, run, 0)); !step) {
    if (detail != nullptr) *detail = step.refusal().message();
    return "census step refuses it";
  }
  return {};
}

std::vector<PipelineSplit> balanced_splits(int64_t layers, int64_t stages, int64_t virtual_stages) {
  const int64_t p = stages, v = virtual_stages, chunks = p * v;
  std::vector<PipelineSplit> out;
  if (layers % chunks == 0) out.push_back({});
  // The embedding and the loss each a layer; at P x V = 2 that is the even split again.
  if ((layers + 2) % chunks == 0 && (layers + 2) / chunks >= 2 && chunks > 2) out.push_back({0, 0, true, true});
  if (!out.empty() || p < 2) return out;
  // The first and last stages' layers, F and La (multiples of V), the middle stages k each (a multiple
  // of V): the fewest units on the busiest stage, the embedding and the loss each a unit, then the
  // smallest spread, then the larger first stage (the loss outweighs the embedding).
  std::tuple<int64_t, int64_t, int64_t> best{-1, 0, 0};  // (most units, spread, -F)
  PipelineSplit chosen;
  for (int64_t k = p > 2 ? v : 0; k <= layers; k += v) {
    const int64_t rest = layers - (p - 2) * k;
    if (rest < 2 * v) break;
    for (int64_t first = v; first <= rest - v; first += v) {
      const int64_t last = rest - first;
      if (last % v != 0) continue;
      int64_t most = std::max(first + 1, last + 1), least = std::min(first + 1, last + 1);
      if (p > 2) most = std::max(most, k), least = std::min(least, k);
      const std::tuple<int64_t, int64_t, int64_t> score{most, most - least, -first};
      if (std::get<0>(best) < 0 || score < best) best = score, chosen = {first, last, false, false};
    }
    if (p == 2) break;
  }
  if (std::get<0>(best) >= 0) out.push_back(chosen);
  return out;
}

namespace {

Result<int64_t> positive(const std::string& key, const std::string& value) {
  int64_t n = 0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (error != std::errc() || end != value.data() + value.size() || n < 1 || n > (int64_t{1} << 24))
    return refuse("--layout " + key, echoed(value) + " is not a degree; give a whole number from 1");
  return n;
}

}  // namespace

Result<Layout> parse_layout(const ModelConfig& c, const RunShape& run, const std::string& text) {
  static const char* const kKeys =
      "tp, cp, ep, pp, vpp, dp, mbs, recompute, recompute.KIND, zero, fsdp, sp, schedule, first, last, etp";
  std::map<std::string, std::string> given;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, comma - at);
    at = comma + 1;
    const size_t equals = item.find('=');
    if (equals == std::string::npos) return refuse("--layout", echoed(item) + " is not KEY=VALUE; keys: " + kKeys);
    const std::string key = item.substr(0, equals), value = item.substr(equals + 1);
    static const std::vector<std::string> kKnown = {"tp", "cp", "ep", "pp", "vpp", "dp", "mbs", "recompute",
                                                    "zero", "fsdp", "sp", "schedule", "first", "last", "etp"};
    if (std::find(kKnown.begin(), kKnown.end(), key) == kKnown.end() && key.rfind("recompute.", 0) != 0)
      return refuse("--layout", echoed(key) + " is not a key; use " + kKeys);
    if (!given.emplace(key, value).second) return refuse("--layout", "gives " + key + " twice; give each key once");
  }
  Layout l;
  for (auto [key, into] : {std::pair{"tp", &l.tp}, std::pair{"cp", &l.cp}, std::pair{"ep", &l.ep},
                           std::pair{"pp", &l.pp}, std::pair{"vpp", &l.virtual_stages}, std::pair{"mbs", &l.micro_batch_size}})
    if (given.count(key)) {
      auto n = positive(key, given[key]);
      CENSUS_TRY(n);
      *into = *n;
    }
  const int64_t model_ranks = l.tp * l.cp * l.pp;
  if (given.count("dp")) {
    auto n = positive("dp", given["dp"]);
    CENSUS_TRY(n);
    l.dp = *n;
    if (model_ranks * l.dp != run.gpus)
      return refuse("--layout", "tp x cp x pp x dp = " + std::to_string(model_ranks * l.dp) + " is not --gpus " +
                                    std::to_string(run.gpus) + "; make the product of the degrees the devices");
  } else {
    if (run.gpus % model_ranks != 0)
      return refuse("--layout", "tp x cp x pp = " + std::to_string(model_ranks) + " does not divide --gpus " +
                                    std::to_string(run.gpus) + "; dp is what remains of the devices");
    l.dp = run.gpus / model_ranks;
  }
  if (given.count("schedule")) {
    const std::string& s = given["schedule"];
    if (s == "1f1b") l.schedule = PipelineSchedule::k1F1B;
    else if (s == "gpipe") l.schedule = PipelineSchedule::kGPipe;
    else if (s == "interleaved") l.schedule = PipelineSchedule::kInterleaved;
    else return refuse("--layout schedule", echoed(s) + " is not known; use 1f1b, gpipe or interleaved");
  } else if (l.virtual_stages > 1) {
    l.schedule = PipelineSchedule::kInterleaved;
  }
  int fsdp = 0, sp = 0;
  for (auto [key, into] : {std::pair{"zero", &l.zero}, std::pair{"fsdp", &fsdp}, std::pair{"sp", &sp}}) {
    if (!given.count(key)) continue;
    const std::string& value = given[key];
    const int most = into == &l.zero ? 3 : 1;
    if (value.size() != 1 || value[0] < '0' || value[0] > '0' + most)
      return refuse(std::string("--layout ") + key, echoed(value) + " is not known; use 0 to " + std::to_string(most));
    *into = value[0] - '0';
  }
  l.fsdp = fsdp == 1, l.sp = sp == 1;
  std::string recompute = given.count("recompute") ? given["recompute"] : "none";
  for (const auto& [key, value] : given)
    if (key.rfind("recompute.", 0) == 0) recompute += "," + key.substr(10) + "=" + value;
  auto choice = parse_recompute(c, recompute, "--layout recompute");
  CENSUS_TRY(choice);
  // The time model prices a layer's recompute under none, selective and full checkpointing; the other
  // policies census step prices in memory alone.
  bool timed = choice->every_nth_layer == 0;
  for (Recompute mode : {choice->all}) timed = timed && (mode == Recompute::kNone || mode == Recompute::kSelective || mode == Recompute::kFull);
  for (const auto& [kind, mode] : choice->by_kind)
    timed = timed && (mode == Recompute::kNone || mode == Recompute::kSelective || mode == Recompute::kFull);
  if (!timed)
    return refuse("--layout recompute=" + recompute,
                  "the plan's time model prices none, selective and full checkpointing; price this policy's memory "
                  "with census step --recompute");
  l.recompute = *choice;
  if (given.count("first") || given.count("last")) {
    for (auto [key, into] : {std::pair{"first", &l.split.first_stage_layers}, std::pair{"last", &l.split.last_stage_layers}})
      if (given.count(key)) {
        auto n = positive(key, given[key]);
        CENSUS_TRY(n);
        *into = *n;
      }
  } else if (!pipeline_chunks(c.num_hidden_layers, l.pp, l.virtual_stages, {})) {
    // Where the even split does not divide the layers: the one the search would try.
    const std::vector<PipelineSplit> splits = balanced_splits(c.num_hidden_layers, l.pp, l.virtual_stages);
    if (!splits.empty()) l.split = splits.front();
  }
  if (given.count("etp")) {
    auto n = positive("etp", given["etp"]);
    CENSUS_TRY(n);
    if (*n != 1 && *n != l.tp) return refuse("--layout etp", "must be 1 (whole experts) or tp (" + std::to_string(l.tp) + ")");
    l.etp = *n == 1 && l.tp > 1 ? 1 : 0;
  } else if (l.tp > 1 && !l.sp && (l.dp * l.cp) % l.ep != 0 && (l.tp * l.dp * l.cp) % l.ep == 0 &&
             c.moe.moe_intermediate_size > 0) {
    l.etp = 1;  // EP from the TP ranks too: Megatron keeps the experts whole then
  }
  if (run.global_batch % l.dp == 0) l.micro_batches = run.global_batch / l.dp / l.micro_batch_size;
  std::string detail;
  const std::string rule = layout_rule_broken(c, run, l, &detail);
  if (!rule.empty()) return refuse("--layout", rule + (detail.empty() ? "" : " (" + detail + ")"));
  return l;
}

}  // namespace census
