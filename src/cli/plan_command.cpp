#include "cli/plan_command.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "alloc/alloc_conf.h"
#include "cli/fine_tuning_options.h"
#include "cli/from_file.h"
#include "cli/options.h"
#include "plan/plan.h"
#include "cli/request.h"
#include "cli/step_command.h"
#include "report/table.h"
#include "util/escape.h"

namespace census::cli {
namespace {

using nlohmann::ordered_json;

// A device's figure: finite and within the plan's bounds (census/plan.h).
constexpr NumberRule figure_rule(const char* flag, const char* unit) { return {flag, kLeastFigure, kLargestFigure, unit}; }
constexpr NumberRule kComputeEfficiencyRule{"--compute-efficiency", kLeastEfficiency, 1, ""};

int refuse_line(std::ostream& err, const std::string& message) {
  err << "census: " << escaped(message) << '\n';
  return 2;
}

std::string seconds_text(double s) {
  char buffer[32];
  if (s >= 1) std::snprintf(buffer, sizeof buffer, "%.2f s", s);
  else std::snprintf(buffer, sizeof buffer, "%.1f ms", s * 1e3);
  return buffer;
}

// The optimizer as the header names it, "AdamW (foreach)" or "adamw8bit", and as the JSON does.
std::string optimizer_label(const RunShape& run) {
  if (run.optimizer == StepOptimizer::kAdamW) return "AdamW (" + std::string(nn::optimizer_impl_name(run.optimizer_impl)) + ")";
  std::string label = "optimizer " + std::string(optimizer_name(run.optimizer));
  if (!optimizer_forms(run.optimizer).empty()) label += " (" + std::string(nn::optimizer_impl_name(run.optimizer_impl)) + ")";
  return label;
}

ordered_json optimizer_json(const RunShape& run) {
  ordered_json j = {{"name", std::string(optimizer_name(run.optimizer))}};
  if (!optimizer_forms(run.optimizer).empty()) j["implementation"] = std::string(nn::optimizer_impl_name(run.optimizer_impl));
  return j;
}

// --search's choices by name (an empty list: not searched).
template <typename Choice>
ordered_json search_names(const std::vector<Choice>& choices, std::string_view (*name)(Choice)) {
  ordered_json names = ordered_json::array();
  for (const Choice choice : choices) names.push_back(std::string(name(choice)));
  return names;
}

// The schedule and the split: "interleaved V4 e+l" (the embedding and loss counted as layers), "1f1b
// F3 L2" (the first and last stages' layers).
std::string schedule_cell(const Layout& l) {
  std::string cell = schedule_label(l);
  const PipelineSplit& s = l.split;
  if (s.embedding_as_layer || s.loss_as_layer)
    cell += std::string(" ") + (s.embedding_as_layer ? "e" : "") + (s.embedding_as_layer && s.loss_as_layer ? "+" : "") +
            (s.loss_as_layer ? "l" : "");
  if (s.first_stage_layers > 0) cell += " F" + std::to_string(s.first_stage_layers);
  if (s.last_stage_layers > 0) cell += " L" + std::to_string(s.last_stage_layers);
  return cell;
}

// The `census step` arguments (after the config) that reproduce the layout's most-loaded rank.
// Under --liger, whose default loss is Liger's, the loss is always named; the run's fine-tuning flags follow.
std::vector<std::string> step_args(const LayoutResult& r, const PlanOptions& o, const PlanArgs& args) {
  const bool liger = args.liger;
  const Layout& l = r.layout;
  std::vector<std::string> a = {"--seq-length", std::to_string(o.run.seq_length), "--micro-batch-size",
                                std::to_string(l.micro_batch_size), "--micro-batches", std::to_string(l.micro_batches),
                                "--pp", std::to_string(l.pp)};
  if (l.pp > 1) {
    a.insert(a.end(), {"--stage", std::to_string(r.worst_stage), "--schedule", schedule_name(l.schedule)});
    if (l.schedule == PipelineSchedule::kInterleaved) a.insert(a.end(), {"--virtual-stages", std::to_string(l.virtual_stages)});
    if (l.split.first_stage_layers > 0) a.insert(a.end(), {"--first-stage-layers", std::to_string(l.split.first_stage_layers)});
    if (l.split.last_stage_layers > 0) a.insert(a.end(), {"--last-stage-layers", std::to_string(l.split.last_stage_layers)});
    if (l.split.embedding_as_layer) a.push_back("--embedding-as-layer");
    if (l.split.loss_as_layer) a.push_back("--loss-as-layer");
  }
  a.insert(a.end(), {"--recompute", recompute_text(l.recompute), "--tp", std::to_string(l.tp), "--dp", std::to_string(l.dp),
                     "--zero", std::to_string(l.zero), "--master-weights", o.time.fp32_master_weights ? "fp32" : "bf16",
                     "--grad-dtype", o.time.fp32_gradients ? "fp32" : "bf16"});
  // The layout's own optimizer and loss: the run's, or the combination --search planned it with.
  if (r.optimizer != StepOptimizer::kAdamW) a.insert(a.end(), {"--optimizer", std::string(optimizer_name(r.optimizer))});
  if (!optimizer_forms(r.optimizer).empty() && o.run.optimizer_impl != default_optimizer_impl(r.optimizer))
    a.insert(a.end(), {"--optimizer-impl", std::string(nn::optimizer_impl_name(o.run.optimizer_impl))});
  if (o.run.first_step) a.push_back("--first-step");
  if (liger) a.push_back("--liger");
  if (r.loss != nn::CausalLMLoss::kForCausalLM || liger)
    a.insert(a.end(), {"--loss", std::string(nn::causal_lm_loss_name(r.loss))});
  if (l.fsdp) a.push_back("--fsdp");  // FSDP2, its dtypes from --master-weights (layout_step_options)
  if (l.fsdp && args.fsdp_wrap == "torchtitan") a.insert(a.end(), {"--fsdp-wrap", "torchtitan"});
  if (!args.kernels.empty() && args.kernels != "npu") a.insert(a.end(), {"--kernels", args.kernels});
  if (l.sp) a.insert(a.end(), {"--sequence-parallel", "--loss-parallel"});
  if (l.cp > 1) a.insert(a.end(), {"--cp", std::to_string(l.cp)});
  if (l.ep > 1) a.insert(a.end(), {"--ep", std::to_string(l.ep)});
  if (l.etp == 1 && l.tp > 1) a.insert(a.end(), {"--expert-tp", "1"});
  for (const auto& [flag, bytes] : {std::pair{"--cuda-context", o.cuda_context}, std::pair{"--nccl-buffers", o.nccl_buffers},
                                    std::pair{"--fragmentation", o.fragmentation}})
    if (bytes > 0) a.insert(a.end(), {flag, std::to_string(bytes)});
  if (o.reserved) {
    a.push_back("--allocator");
    if (!o.alloc_conf.text.empty()) a.insert(a.end(), {"--alloc-conf", o.alloc_conf.text});
  }
  const std::vector<std::string> tuning = fine_tuning_flags(args.fine_tuning);
  a.insert(a.end(), tuning.begin(), tuning.end());
  return a;
}

ordered_json layout_json(const LayoutResult& r, const PlanOptions& o, const PlanArgs& args) {
  const Layout& l = r.layout;
  ordered_json stage_bytes = ordered_json::array();  // null: not simulated (standing_stage stands for it)
  for (int64_t bytes : r.stage_bytes) stage_bytes.push_back(bytes < 0 ? ordered_json(nullptr) : ordered_json(bytes));
  ordered_json time = ordered_json::object();
  for (const TimeTerm& t : r.time.terms) time[t.name] = t.seconds;
  ordered_json overlaps = ordered_json::object();
  for (size_t k = 0; k < kOverlaps; ++k)
    overlaps[overlap_name(static_cast<Overlap>(k))] = {{"on", o.time.overlaps.on[k]}, {"seconds", r.time.overlap_seconds[k]}};
  return {{"tp", l.tp}, {"cp", l.cp}, {"ep", l.ep}, {"expert_tp", l.etp == 1 || l.sp ? 1 : l.tp}, {"pp", l.pp}, {"dp", l.dp},
          {"schedule", l.pp == 1 ? "none" : schedule_name(l.schedule)}, {"virtual_stages", l.virtual_stages},
          {"first_stage_layers", l.split.first_stage_layers}, {"last_stage_layers", l.split.last_stage_layers},
          {"embedding_as_layer", l.split.embedding_as_layer}, {"loss_as_layer", l.split.loss_as_layer},
          {"micro_batch_size", l.micro_batch_size}, {"micro_batches", l.micro_batches},
          {"recompute", recompute_text(l.recompute)}, {"zero", l.zero}, {"fsdp", l.fsdp},
          {"sequence_parallel", l.sp}, {"loss_parallel", l.sp},
          {"optimizer", std::string(optimizer_name(r.optimizer))}, {"loss", std::string(nn::causal_lm_loss_name(r.loss))},
          {"fits", r.simulated && r.peak_bytes <= o.gpu_memory},
          {"peak_bytes", r.peak_bytes}, {"headroom_bytes", o.gpu_memory - r.peak_bytes}, {"worst_stage", r.worst_stage},
          {"memory_lower_bound_bytes", r.memory_bound_bytes},
          {"peak_phase", r.peak.phase},
          {"peak_split", {{"parameters", r.peak.split.parameters()}, {"gradients", r.peak.split.gradients()},
                          {"optimizer_states", r.peak.split.optimizer_states()}, {"other", r.peak.split.other()}}},
          {"stage_bytes", stage_bytes}, {"standing_stage", r.standing},
          {"step_seconds_estimate", r.time.seconds}, {"time_estimate", time}, {"busiest_stage", r.time.busiest_stage},
          {"overlaps", overlaps}, {"step_args", step_args(r, o, args)}};
}

Result<PlanOptions> plan_options(const PlanArgs& a, const ModelConfig& model) {
  PlanOptions o;
  o.run.gpus = a.gpus;
  o.run.gpus_per_node = a.gpus_per_node;
  o.run.seq_length = a.seq_length;
  o.run.global_batch = a.global_batch;
  o.top = a.top;
  const bool figures = a.peak_tflops || a.hbm_gbs || a.link_gbs || a.nic_gbs;
  const bool custom = a.device.empty() && a.peak_tflops && a.hbm_gbs && a.link_gbs && a.nic_gbs;
  const Device* preset = find_device(a.device.empty() ? kDefaultDevice : a.device);
  if (preset == nullptr)
    return refuse("--device", echoed(a.device) + " is not known; use h100, h200, a100, b200, 910b or 910c, or give --peak-tflops, --hbm-gbs, --link-gbs and --nic-gbs");
  o.device = *preset;
  if (custom) {
    o.device.name = "custom";
    o.device.source = "the command line";
    o.device.memory_bytes = 0;
    o.device.calibration.source = "the h100's calibration (no --calibration given): " + o.device.calibration.source;
  }
  // A figure given beside a preset replaces the preset's.
  o.device.peak_tflops = a.peak_tflops.value_or(o.device.peak_tflops);
  o.device.hbm_gbs = a.hbm_gbs.value_or(o.device.hbm_gbs);
  o.device.link_gbs = a.link_gbs.value_or(o.device.link_gbs);
  o.device.nic_gbs = a.nic_gbs.value_or(o.device.nic_gbs);
  if (!custom && figures) o.device.source += "; some figures from the command line";
  if (!a.calibration.empty()) {
    std::ifstream file(a.calibration);
    if (!file) return refuse("--calibration", echoed(a.calibration) + " cannot be read; give a calibration JSON file");
    const nlohmann::json json = nlohmann::json::parse(file, nullptr, /*allow_exceptions=*/false);
    if (json.is_discarded()) return refuse("--calibration", echoed(a.calibration) + " is not JSON");
    auto calibration = read_calibration(json, "--calibration " + echoed(a.calibration));
    CENSUS_TRY(calibration);
    o.device.calibration = *calibration;
  }
  if (a.compute_efficiency) {
    CENSUS_TRY(check_number(kComputeEfficiencyRule, *a.compute_efficiency));
    o.device.calibration.gemm_efficiency = *a.compute_efficiency;
    o.device.calibration.source += "; gemm_efficiency from --compute-efficiency";
  }
  if (!a.gpu_memory && o.device.memory_bytes == 0)
    return refuse("--gpu-memory", "is missing; give the memory of one device, such as 80GiB");
  o.gpu_memory = a.gpu_memory.value_or(o.device.memory_bytes);
  o.cuda_context = a.cuda_context;
  o.nccl_buffers = a.nccl_buffers;
  o.fragmentation = a.fragmentation;
  CENSUS_TRY(parse_choice("--master-weights", {"bf16", "fp32"}, a.master_weights));
  CENSUS_TRY(parse_choice("--grad-dtype", {"bf16", "fp32"}, a.grad_dtype));
  o.time.fp32_master_weights = a.master_weights == "fp32";
  o.time.fp32_gradients = a.grad_dtype == "fp32";
  CENSUS_TRY(parse_choice("--optimizer", optimizer_names(), a.optimizer));
  o.run.optimizer = optimizer_named(a.optimizer).value_or(StepOptimizer::kAdamW);
  if (o.run.optimizer == StepOptimizer::kMuon)
    return refuse("--optimizer muon", "the time model has no Newton-Schulz matmuls of Muon's to rank layouts by yet; "
                                      "plan with adamw, and price Muon's step with census step");
  o.run.optimizer_impl = default_optimizer_impl(o.run.optimizer);
  if (!a.optimizer_impl.empty()) {
    CENSUS_TRY(parse_choice("--optimizer-impl", {"foreach", "fused", "for-loop"}, a.optimizer_impl));
    o.run.optimizer_impl = a.optimizer_impl == "fused"      ? nn::OptimizerImpl::kFused
                           : a.optimizer_impl == "for-loop" ? nn::OptimizerImpl::kForLoop
                                                            : nn::OptimizerImpl::kForEach;
    CENSUS_TRY(check_optimizer(o.run.optimizer, o.run.optimizer_impl));
  }
  o.run.first_step = a.first_step;
  if (!a.fsdp_wrap.empty()) CENSUS_TRY(parse_choice("--fsdp-wrap", {"layers", "torchtitan"}, a.fsdp_wrap));
  o.run.fsdp_wrap = a.fsdp_wrap == "torchtitan" ? FsdpWrap::kTorchtitan : FsdpWrap::kLayers;
  CENSUS_TRY(check_fine_tuning_names(a.fine_tuning));
  StepOptions tuning;
  set_fine_tuning(a.fine_tuning, tuning);
  o.run.lora = tuning.lora;
  o.run.quantize = tuning.quantize;
  o.run.autocast = tuning.autocast;
  o.run.load_dtype = tuning.load_dtype;
  // census step's default: Liger's fused loss under --liger, Transformers' own otherwise.
  const std::string loss = !a.loss.empty() ? a.loss : a.liger ? "liger-flce" : "hf";
  CENSUS_TRY(parse_choice("--loss", nn::causal_lm_loss_names(), loss));
  o.run.loss = nn::causal_lm_loss_named(loss).value_or(nn::CausalLMLoss::kForCausalLM);
  if (!a.search.empty()) {
    for (size_t start = 0; start <= a.search.size();) {
      const size_t comma = std::min(a.search.find(',', start), a.search.size());
      const std::string item = a.search.substr(start, comma - start);
      if (item == "loss" && o.search_losses.empty()) {
        o.search_losses = searched_losses();
      } else if (item == "optimizer" && o.search_optimizers.empty()) {
        o.search_optimizers = searched_optimizers();
      } else {
        return refuse("--search " + a.search, "searches loss, optimizer, or both (\"loss,optimizer\"), each once");
      }
      start = comma + 1;
    }
  }
  if (!a.overlap.empty()) {
    auto overlaps = parse_overlaps(a.overlap);
    CENSUS_TRY(overlaps);
    o.time.overlaps = *overlaps;
  }
  if (!a.reserved && !a.alloc_conf.empty())
    return refuse("--alloc-conf", "configures the caching allocator --reserved simulates; give --reserved too");
  if (a.reserved && o.fragmentation != 0)
    return refuse("--fragmentation", "is what --reserved simulates; give one of them, not both");
  o.reserved = a.reserved;
  CENSUS_ASSIGN(o.alloc_conf, alloc::parse_alloc_conf(a.alloc_conf));
  if (!a.layout.empty()) {
    CENSUS_TRY(check_plan_options(model, o));  // the run's shape first: the layout is read against it
    auto layout = parse_layout(model, plan_run(o), a.layout);
    CENSUS_TRY(layout);
    o.layout = *layout;
  }
  return o;
}

struct Planned {
  PlanOptions options;
  PlanResult result;
  int64_t model_experts = 0;  // the experts EP may shard (0: EP stays 1)
  const char* single_ep = "";  // why EP stays 1, where it does
  int64_t kinds = 1;          // the model's layer kinds
  const char* no_sp = nullptr;  // why census step runs no DTensor plan on the family (tensor_parallel_refusal)
  std::string fine_tuning;  // ", LoRA r 16 ... (the base frozen), nf4 4-bit base (...)", or nothing
};

Result<Planned> plan(const PlanArgs& a, const ModelConfig& model_in) {
  Request request;
  request.command = "step";
  request.model_name = a.model;
  request.config = model_in;
  request.seq_length = a.seq_length;
  request.liger = a.liger;
  request.kernels = a.kernels;
  CENSUS_TRY(check_request(request));
  CENSUS_TRY(apply_options(request));  // --liger: its kernels in the config every layout's step builds
  const ModelConfig& model = request.config;
  auto options = plan_options(a, model);
  CENSUS_TRY(options);
  auto result = census_plan(model, *options);
  CENSUS_TRY(result);
  const char* single_ep = why_expert_parallel_stays_one(model);
  std::vector<std::string> kinds;
  for (const std::string& kind : layer_kinds(model))
    if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) kinds.push_back(kind);
  return Planned{*options, result.take(), single_ep == nullptr ? model.moe.num_experts : 0, single_ep == nullptr ? "" : single_ep,
                 static_cast<int64_t>(kinds.size()), tensor_parallel_refusal(model),
                 lora_label(a.fine_tuning, model) + quantize_label(a.fine_tuning) +
                     (a.fine_tuning.autocast.empty() ? "" : ", " + a.fine_tuning.autocast +
                                                                " autocast on a model loaded in " +
                                                                (a.fine_tuning.load_dtype == "bf16" ? "bf16" : "fp32"))};
}

int64_t batch_of(const PlanOptions& o) { return o.run.global_batch > 0 ? o.run.global_batch : o.run.gpus; }

ordered_json plan_json(const Planned& p, const PlanArgs& a) {
  const PlanOptions& o = p.options;
  const PlanResult& r = p.result;
  ordered_json layouts = ordered_json::array();
  if (r.named) layouts.push_back(layout_json(*r.named, o, a));
  for (const LayoutResult& l : r.top) layouts.push_back(layout_json(l, o, a));
  ordered_json pruned = ordered_json::object();
  for (const auto& [rule, count] : r.pruned_by_rule) pruned[rule] = count;
  const Calibration& cal = o.device.calibration;
  ordered_json j = {
      {"model", a.model},
      {"gpus", o.run.gpus},
      {"gpus_per_node", o.run.gpus_per_node},
      {"gpu_memory_bytes", o.gpu_memory},
      {"overheads", {{"cuda_context", o.cuda_context}, {"nccl_buffers", o.nccl_buffers}, {"fragmentation", o.fragmentation}}},
      {"budget_bytes", r.budget_bytes},
      {"memory", o.reserved ? "reserved" : "allocated"},
      {"alloc_conf", o.reserved ? ordered_json(o.alloc_conf.text) : ordered_json(nullptr)},
      {"seq_length", o.run.seq_length},
      {"global_batch", batch_of(o)},
      {"step", o.run.first_step ? "first" : "steady"},
      {"optimizer", optimizer_json(o.run)},
      {"loss", std::string(nn::causal_lm_loss_name(o.run.loss))}, {"liger", a.liger},
      {"fine_tuning", fine_tuning_flags(a.fine_tuning)},
      {"search", {{"losses", search_names(o.search_losses, nn::causal_lm_loss_name)},
                  {"optimizers", search_names(o.search_optimizers, optimizer_name)}}},
      {"device", {{"name", o.device.name}, {"default", a.device.empty() && o.device.name == kDefaultDevice},
                  {"peak_tflops", o.device.peak_tflops}, {"hbm_gbs", o.device.hbm_gbs},
                  {"link_gbs", o.device.link_gbs}, {"nic_gbs", o.device.nic_gbs}, {"source", o.device.source},
                  {"calibration", {{"gemm_efficiency", cal.gemm_efficiency}, {"gemm_half_gflop", cal.gemm_half_gflop},
                                   {"attention_forward_efficiency", cal.attention_forward_efficiency},
                                   {"attention_backward_efficiency", cal.attention_backward_efficiency},
                                   {"memory_efficiency", cal.memory_efficiency}, {"kernel_floor_us", cal.kernel_floor_us},
                                   {"link_efficiency", cal.link_efficiency}, {"link_latency_us", cal.link_latency_us},
                                   {"nic_efficiency", cal.nic_efficiency}, {"nic_latency_us", cal.nic_latency_us},
                                   {"source", cal.source}}}}},
      {"overlaps", overlaps_text(o.time.overlaps)},
      {"layouts", layouts},
      {"counts", {{"tried", r.counts.tried}, {"pruned_by_divisibility", r.counts.pruned_divisibility},
                  {"estimated", r.counts.estimated},
                  {"rejected_for_memory", r.counts.rejected_memory_bound + r.counts.rejected_memory_simulated},
                  {"rejected_by_lower_bound", r.counts.rejected_memory_bound},
                  {"rejected_by_simulation", r.counts.rejected_memory_simulated}, {"fit", r.counts.fit},
                  {"not_evaluated", r.counts.not_evaluated}, {"simulations", r.counts.simulations},
                  {"stage_runs", r.counts.stage_runs}}},
      {"pruned_by_rule", pruned},
  };
  if (r.smallest)
    j["nothing_fits"] = {{"smallest_memory_bytes", r.smallest->peak_bytes}, {"layout", layout_json(*r.smallest, o, a)}};
  else
    j["nothing_fits"] = nullptr;
  return j;
}

void print_time_terms(const LayoutResult& l, std::ostream& out) {
  Table t({"  term (estimate)", "seconds", "how"});
  for (const TimeTerm& term : l.time.terms) t.add({"  " + term.name, seconds_text(term.seconds), term.formula});
  t.add({"  step", seconds_text(l.time.seconds), "the sum"});
  t.print(out);
}

void print_header(const Planned& p, const PlanArgs& a, std::ostream& out) {
  const PlanOptions& o = p.options;
  const Calibration& cal = o.device.calibration;
  out << a.model << ": plan on " << o.run.gpus << " x " << o.device.name
      << (a.device.empty() && o.device.name == kDefaultDevice ? " (the default device; --device names another)" : "")
      << " (" << human_bytes(static_cast<double>(o.gpu_memory)) << " each, " << o.run.gpus_per_node << " a node), "
      << o.run.seq_length << " tokens a sequence, global batch " << batch_of(o) << " sequences, "
      << optimizer_label(o.run) << ", master weights " << a.master_weights << ", grads "
      << a.grad_dtype << (a.liger ? ", Liger's kernels" : "") << p.fine_tuning
      << (o.run.loss != nn::CausalLMLoss::kForCausalLM ? ", loss " + std::string(nn::causal_lm_loss_name(o.run.loss)) : "")
      << (o.run.first_step ? ", the first step" : ", steady state (step 2 on)")
      << (a.search.empty() ? "" : "; searching " + a.search + " beside the layouts (each layout names its own)") << '\n';
  if (!o.layout && o.run.fine_tuning()) {
    // check_plan_options holds a fine-tuning plan to one device; the memory bounds do not hold there.
    out << "layouts: one device's whole model (census step prices fine-tuning so); b dividing the batch, M = "
        << batch_of(o) << " / b; recompute none or full (the checkpointing census step prices beside fine-tuning); "
           "every layout simulated (no memory bound holds for a frozen base)\n";
  } else if (!o.layout) {
    out << "layouts: TP x CP x PP x DP = " << o.run.gpus << ", TP inside a node (--gpus-per-node " << o.run.gpus_per_node
        << "), CP dividing the " << o.run.seq_length << " tokens; ";
    if (p.model_experts > 0)
      out << "EP dividing the " << p.model_experts << " experts and DP x CP (TP x DP x CP with whole experts: "
          << "EP \"(whole)\"), inside a node or across; ";
    else
      out << "EP 1 (" << p.single_ep << "); ";
    out << "1F1B and interleaved, uneven stages where the layers need them; b dividing the per-rank batch, M = "
        << batch_of(o) << " / (DP x b); recompute per layer" << (p.kinds >= 2 && p.kinds <= 3 ? " kind" : "") << "; ";
    // The modes census step runs beside one another (step_census.cpp refuses the rest).
    if (o.run.optimizer != StepOptimizer::kNone && !optimizer_states_shard_with_parameters(o.run.optimizer))
      out << "no ZeRO, FSDP2 or SP beside " << optimizer_name(o.run.optimizer)
          << " (census step does not shard its states); TP without SP\n";
    else if (o.reserved)
      out << "ZeRO 0-3, TP without SP (census step runs neither FSDP2 nor DTensor's plan under --reserved's allocator)\n";
    else
      out << "ZeRO 0-3, or FSDP2 over DP" << (o.time.fp32_gradients ? " (not beside --grad-dtype fp32)" : "")
          << "; TP " << (p.no_sp != nullptr ? "without SP (DTensor's plan does not name this family's layers)"
                                             : "with or without SP and loss_parallel")
          << "; FSDP2 and SP beside neither CP nor EP\n";
  }
  if (o.reserved)
    out << "memory: RESERVED, the most-loaded stage's reserved peak (PyTorch's caching allocator simulated over census step "
           "--allocator, every stage, PYTORCH_CUDA_ALLOC_CONF "
        << (o.alloc_conf.text.empty() ? std::string("(defaults)") : "\"" + o.alloc_conf.text + "\"")
        << "; a layout fits with no cache flush) against " << grouped(o.gpu_memory);
  else
    out << "memory: the most-loaded stage's simulated peak (census step, every stage) against " << grouped(o.gpu_memory);
  out << " B less cuda_context " << grouped(o.cuda_context) << ", nccl_buffers " << grouped(o.nccl_buffers)
      << ", fragmentation " << grouped(o.fragmentation) << "\n";
  out << "time: an estimate (" << o.device.name << ": " << o.device.peak_tflops << " TFLOPS, HBM " << o.device.hbm_gbs
      << " GB/s, link " << o.device.link_gbs << " GB/s, NIC " << o.device.nic_gbs << " GB/s; GEMMs up to "
      << cal.gemm_efficiency << " of the peak, half that at " << cal.gemm_half_gflop << " GFLOP; attention "
      << cal.attention_forward_efficiency << " forward, " << cal.attention_backward_efficiency << " backward; memory "
      << cal.memory_efficiency << " of HBM; overlaps " << overlaps_text(o.time.overlaps) << ")\n";
  if (a.explain) {
    out << "  device: " << o.device.source << "\n  calibration: " << cal.source << " (links " << cal.link_efficiency
        << " and " << cal.link_latency_us << " us a message inside a node, " << cal.nic_efficiency << " and "
        << cal.nic_latency_us << " us across; kernels at least " << cal.kernel_floor_us << " us)\n";
    if (!o.layout)
      out << "  outside the search: GPipe (1F1B runs its passes with its bubble and fewer micro-batches in flight), "
             "TP across nodes, uneven splits other than the balanced ones, recompute by layer index, FSDP2 or "
             "sequence parallelism beside CP or EP (census step does not simulate them together), FSDP2's "
             "reshard_after_forward other than its default, zero-bubble and DualPipe schedules, FP8\n";
  }
}

void print_detail(const LayoutResult& l, const PlanArgs& a, const PlanOptions& o, std::ostream& out) {
  out << "peak " << grouped(l.peak_bytes) << " B on stage " << l.worst_stage << " at " << l.peak.phase << " (parameters "
      << grouped(l.peak.split.parameters()) << ", gradients " << grouped(l.peak.split.gradients()) << ", optimizer states "
      << grouped(l.peak.split.optimizer_states()) << ", other " << grouped(l.peak.split.other()) << ", overheads "
      << grouped(l.peak_bytes - l.peak.bytes) << "); stages:";
  for (size_t s = 0; s < l.stage_bytes.size(); ++s) {
    if (l.stage_bytes[s] >= 0) {
      out << ' ' << human_bytes(static_cast<double>(l.stage_bytes[s]));
      continue;
    }
    size_t last = s;  // a run of stages one simulation stands for
    while (last + 1 < l.stage_bytes.size() && l.stage_bytes[last + 1] < 0 && l.standing[last + 1] == l.standing[s]) ++last;
    out << " [" << (last > s ? "stages " + std::to_string(s) + "-" + std::to_string(last) : "stage " + std::to_string(s))
        << ": at most stage " << l.standing[s] << "'s]";
    s = last;
  }
  out << "\n  census step " << a.model;
  for (const std::string& arg : step_args(l, o, a)) out << ' ' << arg;
  out << '\n';
  print_time_terms(l, out);
}

void print_plan(const Planned& p, const PlanArgs& a, std::ostream& out) {
  const PlanOptions& o = p.options;
  const PlanResult& r = p.result;
  print_header(p, a, out);
  const PlanCounts& c = r.counts;
  if (!r.named) {
    out << "tried " << c.tried << " layouts: " << c.pruned_divisibility << " pruned by divisibility, " << c.estimated
        << " estimated whole, " << c.rejected_memory_bound + c.rejected_memory_simulated << " rejected for memory ("
        << c.rejected_memory_bound << " by a lower bound: the optimizer step's states or a backward's activations, "
        << c.rejected_memory_simulated << " simulated), " << c.fit << " fit";
    if (c.not_evaluated > 0)
      out << ", " << c.not_evaluated << " not evaluated (slower by the estimate than the " << o.top << " shown)";
    out << "; " << c.simulations << " steps simulated (" << c.stage_runs << " stage runs)\n";
    if (a.explain)
      for (const auto& [rule, count] : r.pruned_by_rule) out << "  pruned: " << rule << ": " << count << '\n';
  }
  out << '\n';
  if (r.top.empty() && r.smallest) {  // a plan has a layout (census_plan refuses one with none)
    const LayoutResult& s = *r.smallest;
    out << "nothing fits in " << human_bytes(static_cast<double>(o.gpu_memory)) << "; the smallest memory that would fit is "
        << grouped(s.peak_bytes) << " B (" << human_bytes(static_cast<double>(s.peak_bytes)) << "): TP " << tensor_parallel_name(s.layout)
        << ", CP " << s.layout.cp << ", EP " << s.layout.ep << ", PP " << s.layout.pp << " (" << schedule_cell(s.layout)
        << "), DP " << s.layout.dp << " " << sharding_name(s.layout) << ", b " << s.layout.micro_batch_size << ", recompute "
        << recompute_text(s.layout.recompute) << ", M " << s.layout.micro_batches << ", stage " << s.worst_stage << " at "
        << s.peak.phase << "\n";
    out << "check: census step " << a.model;
    for (const std::string& arg : step_args(s, o, a)) out << ' ' << arg;
    out << '\n';
    return;
  }
  std::vector<const LayoutResult*> rows;
  if (r.named) rows.push_back(&*r.named);
  for (const LayoutResult& l : r.top) rows.push_back(&l);
  // Under --search each layout says which optimizer and loss it was planned with.
  const bool searched = !o.search_losses.empty() || !o.search_optimizers.empty();
  std::vector<std::string> columns = {"#", "TP", "CP", "EP", "PP", "DP", "schedule", "b", "M", "recompute", "ZeRO"};
  if (searched) columns.insert(columns.end(), {"optimizer", "loss"});
  columns.insert(columns.end(), {"peak", "headroom", "stage", "step (est.)", "compute", "comm", "bubble"});
  Table t(columns);
  for (size_t i = 0; i < rows.size(); ++i) {
    const LayoutResult& l = *rows[i];
    double compute = 0, comm = 0, bubble = 0;
    for (const TimeTerm& term : l.time.terms) {
      if (term.name.find("communication") != std::string::npos) comm += term.seconds;
      else if (term.name == "pipeline_bubble") bubble += term.seconds;
      else compute += term.seconds;
    }
    std::vector<std::string> row = {
        r.named ? "-" : std::to_string(i + 1), tensor_parallel_name(l.layout), std::to_string(l.layout.cp),
        std::to_string(l.layout.ep) + (l.layout.etp == 1 && l.layout.tp > 1 ? " (whole)" : ""),
        std::to_string(l.layout.pp), std::to_string(l.layout.dp), schedule_cell(l.layout),
        std::to_string(l.layout.micro_batch_size), std::to_string(l.layout.micro_batches), recompute_text(l.layout.recompute),
        l.layout.fsdp ? "FSDP" : std::to_string(l.layout.zero)};
    if (searched) row.insert(row.end(), {std::string(optimizer_name(l.optimizer)), std::string(nn::causal_lm_loss_name(l.loss))});
    row.insert(row.end(), {human_bytes(static_cast<double>(l.peak_bytes)),
                           human_bytes(static_cast<double>(o.gpu_memory - l.peak_bytes)), std::to_string(l.worst_stage),
                           seconds_text(l.time.seconds), seconds_text(compute), seconds_text(comm), seconds_text(bubble)});
    t.add(row);
  }
  t.print(out);
  if (r.named) {
    const LayoutResult& l = *r.named;
    out << '\n' << (l.peak_bytes <= o.gpu_memory ? "fits" : "does not fit") << " in "
        << human_bytes(static_cast<double>(o.gpu_memory)) << ": ";
    print_detail(l, a, o, out);
    return;
  }
  if (!a.explain) return;
  for (size_t i = 0; i < r.top.size(); ++i) {
    out << "\n#" << i + 1 << ": ";
    print_detail(r.top[i], a, o, out);
  }
}

}  // namespace

CLI::App* add_plan_command(CLI::App& app, PlanArgs& a) {
  CLI::App* sub = app.add_subcommand("plan", "every parallel layout that fits on N devices, ranked by an estimated step time");
  sub->add_option("config", a.model, "a config.json path, or a shipped model name (census models); with --from, where "
                                     "the file names a model Census does not ship");
  add_integer_option(*sub, degree_rule("--gpus"), a.gpus, "devices in the run")->required();
  add_bytes_option(*sub, "--gpu-memory", a.gpu_memory, "memory of one device: 80GiB, 141GB, or bytes (default: the --device preset's)");
  add_integer_option(*sub, degree_rule("--gpus-per-node"), a.gpus_per_node,
                     "devices a node holds; TP stays inside one (default 8)");
  add_integer_option(*sub, kSeqLengthRule, a.seq_length, "tokens of one sequence (default 4096)");
  add_integer_option(*sub, {"--global-batch", 1, kLargestGlobalBatch, "the most sequences a step takes"}, a.global_batch,
                     "sequences a step (default: one a device)");
  add_text_option(*sub, "--device", a.device,
                  "a preset: h100 (default), h200, a100, b200, 910b, 910c (datasheet figures, calibrated)",
                  "name a preset, or leave the option out (h100)");
  add_number_option(*sub, figure_rule("--peak-tflops", "TFLOPS"), a.peak_tflops,
                    "dense bf16 TFLOPS of one device (replaces the preset's)");
  add_number_option(*sub, figure_rule("--hbm-gbs", "GB/s"), a.hbm_gbs, "HBM bandwidth, GB/s");
  add_number_option(*sub, figure_rule("--link-gbs", "GB/s"), a.link_gbs,
                    "scale-up link (NVLink, HCCS) per device and direction, GB/s");
  add_number_option(*sub, figure_rule("--nic-gbs", "GB/s"), a.nic_gbs, "scale-out network per device and direction, GB/s");
  add_text_option(*sub, "--calibration", a.calibration,
                  "a JSON file of every calibration field (docs/plan.md), replacing the preset's",
                  "give the path of a calibration JSON file, or leave the option out");
  add_number_option(*sub, kComputeEfficiencyRule, a.compute_efficiency,
                    "the largest GEMMs' share of the peak (default: the calibration's)");
  add_text_option(*sub, "--overlap", a.overlap,
                  "the overlaps on, comma-separated: fsdp_prefetch, tp_async, ep_1f1b, dp_reduce_scatter, or none "
                  "(default fsdp_prefetch,dp_reduce_scatter)",
                  "give the overlaps on, or none, or leave the option out");
  add_text_option(*sub, "--layout", a.layout,
                  "one layout to price, as \"tp=2,ep=32,pp=8,vpp=4,mbs=1,recompute=selective\" (keys tp cp ep etp pp vpp "
                  "dp mbs recompute zero fsdp schedule first last)",
                  "give a layout such as tp=2,pp=4, or leave the option out");
  add_integer_option(*sub, {"--top", 1, kLargestTop, "the most layouts a plan shows"}, a.top, "layouts shown (default 5)");
  add_choice_option(*sub, "--master-weights", a.master_weights, {"bf16", "fp32"},
                    "bf16 (default) or fp32, as census step takes it");
  add_choice_option(*sub, "--grad-dtype", a.grad_dtype, {"bf16", "fp32"}, "bf16 (default) or fp32, as census step takes it");
  add_choice_option(*sub, "--optimizer", a.optimizer, optimizer_names(),
                    "the optimizer, as census step takes it (default adamw; muon is refused: the time model has no "
                    "Newton-Schulz matmuls of its own yet), laid out without ZeRO, FSDP2 or sequence parallelism "
                    "where census step refuses them beside it");
  add_choice_option(*sub, "--optimizer-impl", a.optimizer_impl, {"foreach", "fused", "for-loop"},
                    "the optimizer's form, as census step takes it (default: the optimizer's own on CUDA, foreach; "
                    "Adafactor's for-loop)");
  add_text_option(*sub, "--search", a.search,
                  "what the plan searches beside the layouts: loss (every --loss census step takes on the model), "
                  "optimizer (adamw and the optimizers that run its update on 8-bit, paged or 4-bit states), or "
                  "loss,optimizer; each searched replaces --loss or --optimizer",
                  "give loss, optimizer or loss,optimizer, or leave the option out");
  add_choice_option(*sub, "--loss", a.loss, nn::causal_lm_loss_names(),
                    "the trainer's loss, as census step takes it: hf (default; liger-flce under --liger), "
                    "trl-chunked-nll, liger-flce, torchtune-chunked or torchtune-linear (laid out "
                    "without TP, CP, ZeRO-3 or FSDP2, which census step refuses beside them)");
  sub->add_flag("--liger", a.liger,
                "Liger's kernels in the layers, as census step --liger runs them (laid out without TP or CP, which "
                "census step refuses beside them)");
  add_fine_tuning_options(*sub, a.fine_tuning);
  add_text_option(*sub, "--kernels", a.kernels,
                  "the kernel profile, as census step takes it: npu (the default, the reference's flash contract) or cuda",
                  "give npu or cuda, or leave the option out");
  add_choice_option(*sub, "--fsdp-wrap", a.fsdp_wrap, {"layers", "torchtitan"},
                    "FSDP2's units in the FSDP2 layouts, as census step takes them: layers (the default) or torchtitan "
                    "(v0.2's: the embedding, each layer, the final norm with the head, then the root)");
  sub->add_option("--from", a.from,
                  "TRAINER FILE: the run a trainer's own config file states (torchtitan, torchtune or trl, as census "
                  "step --from reads it), planned: its model, sequence length, sequences a step, optimizer, loss, "
                  "kernels, precision and fine-tuning; the layout, micro-batch and checkpointing are searched; the "
                  "flags beside it may only name the devices, the search and how to show it")
      ->expected(2)
      ->type_name("TRAINER FILE");
  sub->add_flag("--first-step", a.first_step,
                "fit and rank on the first step (default: the steady state, step 2 and later, the optimizer's states "
                "alive from the start)");
  add_bytes_option(*sub, "--cuda-context", a.cuda_context, "the CUDA context, taken from each device's memory (default 0)");
  add_bytes_option(*sub, "--nccl-buffers", a.nccl_buffers, "NCCL's communicator buffers, taken from it (default 0)");
  add_bytes_option(*sub, "--fragmentation", a.fragmentation,
                   "what the allocator loses to fragmentation, taken from it (default 0)");
  add_choice_option(*sub, "--format", a.format, {"table", "json"}, "table or json (default table)");
  sub->add_flag("--explain", a.explain, "every term of the time estimate, the rules that pruned, each layout's step command");
  sub->add_flag("--reserved", a.reserved, "rank on reserved memory: PyTorch's caching allocator simulated over each step");
  add_text_option(*sub, "--alloc-conf", a.alloc_conf, "PYTORCH_CUDA_ALLOC_CONF for --reserved, e.g. \"expandable_segments:True\"",
                  "give the allocator's settings, or leave the option out");
  return sub;
}

Result<ordered_json> plan_report_json(const PlanArgs& a, const ModelConfig& config) {
  auto planned = plan(a, config);
  CENSUS_TRY(planned);
  return plan_json(*planned, a);
}

namespace {

// The plan's arguments with a trainer's file read (--from), and the file's record.
struct PlanFrom {
  PlanArgs args;
  std::optional<TrainerFile> file;
};

// The file's run as the plan takes it: its model (a config beside it replaces the name), sequence length,
// sequences a step (its micro-batch x micro-batches x data-parallel ranks), optimizer, loss, Liger, kernels,
// precision, FSDP2's units and fine-tuning. Its layout, micro-batch and checkpointing are what the plan
// searches; what it cannot lay out beside them is refused by the flag the file sets.
Result<PlanFrom> plan_from_file(const PlanArgs& a) {
  TrainerFileContext context{a.gpus, !a.model.empty(), a.seq_length_given ? a.seq_length : 0};
  context.world_flag = "--gpus";
  auto file = read_from(a.from, context);
  CENSUS_TRY(file);
  if (!*file) return PlanFrom{a, std::nullopt};
  const Run& stated = (*file)->run;
  const char* unplanned = !stated.offload_activations.empty()         ? "--offload-activations"
                          : !stated.fp8.empty()                       ? "--fp8"
                          : stated.optimizer_in_backward              ? "--optimizer-in-backward"
                          : stated.cpu_offload                        ? "--cpu-offload"
                          : !stated.experts_implementation.empty()    ? "--experts-implementation"
                          : !stated.train_yaml.empty()                ? "--train-yaml"
                          : stated.reshard_after_forward != "default" ? "--reshard-after-forward"
                                                                   : nullptr;
  if (unplanned != nullptr)
    return refuse(std::string(unplanned) + " from " + echoed(a.from[1]),
                  "census plan lays out no run with it yet; price the file's own layout with census step --from");
  PlanFrom out{a, file.take()};
  const Run& run = out.file->run;
  PlanArgs& p = out.args;
  if (a.model.empty()) p.model = run.model;
  p.seq_length = run.seq_length;
  p.global_batch = run.micro_batch_size * run.micro_batches * run.dp;  // at most 2^16 x 2^12 x 2^20
  p.optimizer = run.optimizer;
  p.optimizer_impl = run.optimizer_impl;
  p.loss = run.loss;
  p.liger = run.liger;
  p.kernels = run.kernels;
  p.fsdp_wrap = run.fsdp_wrap;
  p.master_weights = run.master_weights;
  p.grad_dtype = run.grad_dtype;
  p.fine_tuning = run;  // its fine-tuning fields alone are read
  return out;
}

// The census plan arguments that state the same plan as the file: the flags --from stands for.
std::vector<std::string> plan_flags(const PlanArgs& p) {
  std::vector<std::string> flags = {p.model, "--gpus", std::to_string(p.gpus), "--seq-length", std::to_string(p.seq_length),
                                    "--global-batch", std::to_string(p.global_batch)};
  const PlanArgs d;
  const auto text = [&](const char* flag, const std::string& value, const std::string& left_out) {
    if (!value.empty() && value != left_out) flags.insert(flags.end(), {flag, value});
  };
  text("--optimizer", p.optimizer, d.optimizer);
  text("--optimizer-impl", p.optimizer_impl, "");
  text("--loss", p.loss, "");
  if (p.liger) flags.emplace_back("--liger");
  text("--kernels", p.kernels, "npu");
  text("--fsdp-wrap", p.fsdp_wrap, "layers");
  text("--master-weights", p.master_weights, d.master_weights);
  text("--grad-dtype", p.grad_dtype, d.grad_dtype);
  const std::vector<std::string> tuning = fine_tuning_flags(p.fine_tuning);
  flags.insert(flags.end(), tuning.begin(), tuning.end());
  return flags;
}

}  // namespace

Status check_plan_flags_beside_from(const CLI::App& plan, const PlanArgs& a) {
  if (a.from.empty()) return {};
  return check_flags_beside_file(
      plan, {"--from", "--gpus", "--gpu-memory", "--gpus-per-node", "--seq-length", "--device", "--peak-tflops",
             "--hbm-gbs", "--link-gbs", "--nic-gbs", "--calibration", "--compute-efficiency", "--overlap", "--layout",
             "--top", "--search", "--first-step", "--cuda-context", "--nccl-buffers", "--fragmentation", "--format",
             "--explain", "--reserved", "--alloc-conf", "config"});
}

int run_plan_command(const PlanArgs& given, std::ostream& out, std::ostream& err) {
  auto from = plan_from_file(given);
  if (!from) return refuse_line(err, from.refusal().message());
  const PlanArgs& a = from->args;
  if (a.model.empty())
    return refuse_line(err, "census plan: give a config.json or a shipped model name (census models), or --from TRAINER FILE");
  auto model = resolve_model(a.model);
  if (!model) return refuse_line(err, model.refusal().message());
  auto planned = plan(a, *model);
  if (!planned) return refuse_line(err, planned.refusal().message());
  std::ostringstream answer;  // printed whole or not at all
  if (a.format == "json") {
    ordered_json report = plan_json(*planned, a);
    if (from->file) report["from"] = trainer_file_json(given.from, *from->file, plan_flags(a));
    answer << report.dump(2) << '\n';
  } else {
    if (from->file) {
      std::string command = "census plan";
      for (const std::string& flag : plan_flags(a)) command += ' ' + flag;
      print_trainer_file(given.from, *from->file, command + "; the layout, micro-batch and checkpointing searched", answer);
    }
    print_plan(*planned, a, answer);
  }
  out << answer.str();
  return 0;
}

}  // namespace census::cli
