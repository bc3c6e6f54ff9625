#include "cli/plan_command.h"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "plan/plan.h"
#include "cli/request.h"
#include "cli/step_command.h"
#include "report/table.h"
#include "util/escape.h"

namespace census::cli {
namespace {

using nlohmann::ordered_json;

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

std::string layout_name(const Layout& l) {
  std::string s = l.pp == 1 ? "none" : schedule_name(l.schedule);
  if (l.schedule == PipelineSchedule::kInterleaved) s += " V" + std::to_string(l.virtual_stages);
  return s;
}

// The `census step` arguments (after the config) that reproduce the layout's most-loaded rank.
std::vector<std::string> step_args(const LayoutResult& r, const PlanOptions& o) {
  const Layout& l = r.layout;
  std::vector<std::string> a = {"--seq-length", std::to_string(o.seq_length), "--micro-batches",
                                std::to_string(l.micro_batches), "--pp", std::to_string(l.pp)};
  if (l.pp > 1) {
    a.insert(a.end(), {"--stage", std::to_string(r.worst_stage), "--schedule", schedule_name(l.schedule)});
    if (l.schedule == PipelineSchedule::kInterleaved) a.insert(a.end(), {"--virtual-stages", std::to_string(l.virtual_stages)});
  }
  a.insert(a.end(), {"--recompute", recompute_name(l.recompute), "--tp", std::to_string(l.tp), "--dp",
                     std::to_string(l.dp), "--zero", std::to_string(l.zero), "--master-weights",
                     o.fp32_master_weights ? "fp32" : "bf16", "--grad-dtype", o.fp32_gradients ? "fp32" : "bf16"});
  if (l.cp > 1) a.insert(a.end(), {"--cp", std::to_string(l.cp)});
  if (l.ep > 1) a.insert(a.end(), {"--ep", std::to_string(l.ep)});
  for (const auto& [flag, bytes] : {std::pair{"--cuda-context", o.cuda_context}, std::pair{"--nccl-buffers", o.nccl_buffers},
                                    std::pair{"--fragmentation", o.fragmentation}})
    if (bytes > 0) a.insert(a.end(), {flag, std::to_string(bytes)});
  return a;
}

ordered_json layout_json(const LayoutResult& r, const PlanOptions& o) {
  const Layout& l = r.layout;
  ordered_json time = ordered_json::object();
  for (const TimeTerm& t : r.time) time[t.name] = t.seconds;
  return {{"tp", l.tp}, {"cp", l.cp}, {"ep", l.ep}, {"pp", l.pp}, {"dp", l.dp},
          {"schedule", l.pp == 1 ? "none" : schedule_name(l.schedule)}, {"virtual_stages", l.virtual_stages},
          {"micro_batches", l.micro_batches}, {"recompute", recompute_name(l.recompute)}, {"zero", l.zero},
          {"peak_bytes", r.peak_bytes}, {"headroom_bytes", o.gpu_memory - r.peak_bytes}, {"worst_stage", r.worst_stage},
          {"peak_phase", r.peak.phase},
          {"peak_split", {{"parameters", r.peak.split.parameters()}, {"gradients", r.peak.split.gradients()},
                          {"optimizer_states", r.peak.split.optimizer_states()}, {"other", r.peak.split.other()}}},
          {"stage_bytes", r.stage_bytes},
          {"step_seconds_estimate", r.step_seconds}, {"time_estimate", time},
          {"step_args", step_args(r, o)}};
}

bool given(double figure) { return !std::isnan(figure); }

Result<PlanOptions> plan_options(const PlanArgs& a) {
  PlanOptions o;
  o.gpus = a.gpus;
  o.gpus_per_node = a.gpus_per_node;
  o.seq_length = a.seq_length;
  o.global_batch = a.global_batch;
  o.compute_efficiency = a.compute_efficiency;
  o.top = a.top;
  if (!a.device.empty()) {
    const Device* preset = find_device(a.device);
    if (preset == nullptr) return refuse("--device", echoed(a.device) + " is not known; use h100, h200, a100, b200, 910b or 910c, or give --peak-tflops, --hbm-gbs, --link-gbs and --nic-gbs");
    o.device = *preset;
  } else {
    if (!given(a.peak_tflops) || !given(a.hbm_gbs) || !given(a.link_gbs) || !given(a.nic_gbs))
      return refuse("--device", "is missing; name a preset (h100, h200, a100, b200, 910b, 910c) or give all of --peak-tflops, --hbm-gbs, --link-gbs and --nic-gbs");
    o.device.name = "custom";
    o.device.source = "the command line";
  }
  // A figure given beside a preset replaces the preset's.
  if (given(a.peak_tflops)) o.device.peak_tflops = a.peak_tflops;
  if (given(a.hbm_gbs)) o.device.hbm_gbs = a.hbm_gbs;
  if (given(a.link_gbs)) o.device.link_gbs = a.link_gbs;
  if (given(a.nic_gbs)) o.device.nic_gbs = a.nic_gbs;
  if (!a.device.empty() && (given(a.peak_tflops) || given(a.hbm_gbs) || given(a.link_gbs) || given(a.nic_gbs))) o.device.source += "; some figures from the command line";
  if (a.gpu_memory.empty()) {
    if (o.device.memory_bytes == 0) return refuse("--gpu-memory", "is missing; give the memory of one device, such as 80GiB");
    o.gpu_memory = o.device.memory_bytes;
  } else {
    auto memory = parse_bytes("--gpu-memory", a.gpu_memory);
    CENSUS_TRY(memory);
    o.gpu_memory = *memory;
  }
  for (const auto& [flag, text, into] : {std::tuple{"--cuda-context", &a.cuda_context, &o.cuda_context},
                                         std::tuple{"--nccl-buffers", &a.nccl_buffers, &o.nccl_buffers},
                                         std::tuple{"--fragmentation", &a.fragmentation, &o.fragmentation}}) {
    auto bytes = parse_bytes(flag, *text);
    CENSUS_TRY(bytes);
    *into = *bytes;
  }
  if (a.master_weights != "bf16" && a.master_weights != "fp32") return refuse("--master-weights", echoed(a.master_weights) + " is not known; use bf16 or fp32");
  if (a.grad_dtype != "bf16" && a.grad_dtype != "fp32") return refuse("--grad-dtype", echoed(a.grad_dtype) + " is not known; use bf16 or fp32");
  o.fp32_master_weights = a.master_weights == "fp32";
  o.fp32_gradients = a.grad_dtype == "fp32";
  return o;
}

struct Planned {
  PlanOptions options;
  PlanResult result;
  int64_t model_experts = 0;  // the experts EP may shard (0: EP stays 1)
  bool eager_experts = false;
};

Result<Planned> plan(const PlanArgs& a, const ModelConfig& model) {
  auto options = plan_options(a);
  CENSUS_TRY(options);
  Request request;
  request.command = "step";
  request.model_name = a.model;
  request.config = model;
  request.seq_length = a.seq_length;
  CENSUS_TRY(check_request(request));
  auto result = census_plan(model, *options);
  CENSUS_TRY(result);
  const bool shards = model.moe.num_experts > 0 && model.moe.experts_implementation == nn::ExpertsImplementation::kGroupedMm;
  return Planned{*options, result.take(), shards ? model.moe.num_experts : 0, model.moe.num_experts > 0 && !shards};
}

ordered_json plan_json(const Planned& p, const PlanArgs& a) {
  const PlanOptions& o = p.options;
  const PlanResult& r = p.result;
  ordered_json layouts = ordered_json::array();
  for (const LayoutResult& l : r.top) layouts.push_back(layout_json(l, o));
  ordered_json pruned = ordered_json::object();
  for (const auto& [rule, count] : r.pruned_by_rule) pruned[rule] = count;
  ordered_json j = {
      {"model", a.model},
      {"gpus", o.gpus},
      {"gpus_per_node", o.gpus_per_node},
      {"gpu_memory_bytes", o.gpu_memory},
      {"overheads", {{"cuda_context", o.cuda_context}, {"nccl_buffers", o.nccl_buffers}, {"fragmentation", o.fragmentation}}},
      {"budget_bytes", r.budget_bytes},
      {"seq_length", o.seq_length},
      {"global_batch", o.global_batch > 0 ? o.global_batch : o.gpus},
      {"device", {{"name", o.device.name}, {"peak_tflops", o.device.peak_tflops}, {"hbm_gbs", o.device.hbm_gbs},
                  {"link_gbs", o.device.link_gbs}, {"nic_gbs", o.device.nic_gbs},
                  {"compute_efficiency", o.compute_efficiency}, {"source", o.device.source}}},
      {"layouts", layouts},
      {"counts", {{"tried", r.counts.tried}, {"pruned_by_divisibility", r.counts.pruned_divisibility},
                  {"rejected_for_memory", r.counts.rejected_memory_bound + r.counts.rejected_memory_simulated},
                  {"rejected_by_lower_bound", r.counts.rejected_memory_bound},
                  {"rejected_by_simulation", r.counts.rejected_memory_simulated}, {"fit", r.counts.fit},
                  {"not_evaluated", r.counts.not_evaluated}, {"simulations", r.counts.simulations},
                  {"stage_runs", r.counts.stage_runs}}},
      {"pruned_by_rule", pruned},
  };
  if (r.smallest)
    j["nothing_fits"] = {{"smallest_memory_bytes", r.smallest->peak_bytes}, {"layout", layout_json(*r.smallest, o)}};
  else
    j["nothing_fits"] = nullptr;
  return j;
}

void print_time_terms(const LayoutResult& l, std::ostream& out) {
  Table t({"  term (estimate)", "seconds", "how"});
  for (const TimeTerm& term : l.time) t.add({"  " + term.name, seconds_text(term.seconds), term.formula});
  t.add({"  step", seconds_text(l.step_seconds), "the sum"});
  t.print(out);
}

void print_plan(const Planned& p, const PlanArgs& a, std::ostream& out) {
  const PlanOptions& o = p.options;
  const PlanResult& r = p.result;
  const int64_t batch = o.global_batch > 0 ? o.global_batch : o.gpus;
  out << a.model << ": plan on " << o.gpus << " x " << o.device.name << " (" << human_bytes(static_cast<double>(o.gpu_memory))
      << " each, " << o.gpus_per_node << " a node), " << o.seq_length << " tokens a sequence, global batch " << batch
      << " sequences, AdamW, master weights " << a.master_weights << ", grads " << a.grad_dtype << '\n';
  out << "layouts: TP x CP x PP x DP = " << o.gpus << ", TP inside a node (--gpus-per-node " << o.gpus_per_node
      << "), CP dividing the " << o.seq_length << " tokens; ";
  if (p.model_experts > 0)
    out << "EP dividing the " << p.model_experts << " experts and DP x CP (the expert layers' data-parallel ranks), "
        << "TP x EP inside a node; ";
  else
    out << (p.eager_experts ? "EP 1 (eager experts: census step shards grouped_mm ones); " : "EP 1 (no experts); ");
  out << "a micro-batch is one sequence, so M = " << batch << " / DP\n";
  out << "memory: the most-loaded stage's simulated peak (census step, every stage) against " << grouped(o.gpu_memory)
      << " B less cuda_context " << grouped(o.cuda_context) << ", nccl_buffers " << grouped(o.nccl_buffers)
      << ", fragmentation " << grouped(o.fragmentation) << "\n";
  out << "time: an estimate (" << o.device.name << ": " << o.device.peak_tflops << " TFLOPS x " << o.compute_efficiency
      << ", HBM " << o.device.hbm_gbs << " GB/s, link " << o.device.link_gbs << " GB/s, NIC " << o.device.nic_gbs
      << " GB/s; " << o.device.source << ")\n";
  const PlanCounts& c = r.counts;
  out << "tried " << c.tried << " layouts: " << c.pruned_divisibility << " pruned by divisibility, "
      << c.rejected_memory_bound + c.rejected_memory_simulated << " rejected for memory (" << c.rejected_memory_bound
      << " by parameters, gradients and optimizer states alone, " << c.rejected_memory_simulated << " simulated), "
      << c.fit << " fit";
  if (c.not_evaluated > 0)
    out << ", " << c.not_evaluated << " not evaluated (slower by the estimate than the " << o.top << " shown)";
  out << "; " << c.simulations << " steps simulated (" << c.stage_runs << " stage runs)\n";
  if (a.explain) {
    for (const auto& [rule, count] : r.pruned_by_rule) out << "  pruned: " << rule << ": " << count << '\n';
  }
  out << '\n';
  if (r.top.empty() && r.smallest) {  // a plan has a layout (census_plan refuses one with none)
    const LayoutResult& s = *r.smallest;
    out << "nothing fits in " << human_bytes(static_cast<double>(o.gpu_memory)) << "; the smallest memory that would fit is "
        << grouped(s.peak_bytes) << " B (" << human_bytes(static_cast<double>(s.peak_bytes)) << "): TP " << s.layout.tp
        << ", CP " << s.layout.cp << ", EP " << s.layout.ep << ", PP " << s.layout.pp << " (" << layout_name(s.layout) << "), DP " << s.layout.dp << " ZeRO-" << s.layout.zero
        << ", recompute " << recompute_name(s.layout.recompute) << ", M " << s.layout.micro_batches << ", stage "
        << s.worst_stage << " at " << s.peak.phase << "\n";
    out << "check: census step " << a.model;
    for (const std::string& arg : step_args(s, o)) out << ' ' << arg;
    out << '\n';
    return;
  }
  Table t({"#", "TP", "CP", "EP", "PP", "DP", "schedule", "M", "recompute", "ZeRO", "peak", "headroom", "stage", "step (est.)",
           "compute", "comm", "bubble"});
  for (size_t i = 0; i < r.top.size(); ++i) {
    const LayoutResult& l = r.top[i];
    double compute = 0, comm = 0, bubble = 0;
    for (const TimeTerm& term : l.time) {
      if (term.name.find("communication") != std::string::npos) comm += term.seconds;
      else if (term.name == "pipeline_bubble") bubble += term.seconds;
      else compute += term.seconds;
    }
    t.add({std::to_string(i + 1), std::to_string(l.layout.tp), std::to_string(l.layout.cp),
           std::to_string(l.layout.ep), std::to_string(l.layout.pp), std::to_string(l.layout.dp),
           layout_name(l.layout), std::to_string(l.layout.micro_batches), recompute_name(l.layout.recompute),
           std::to_string(l.layout.zero), human_bytes(static_cast<double>(l.peak_bytes)),
           human_bytes(static_cast<double>(o.gpu_memory - l.peak_bytes)), std::to_string(l.worst_stage),
           seconds_text(l.step_seconds), seconds_text(compute), seconds_text(comm), seconds_text(bubble)});
  }
  t.print(out);
  if (!a.explain) return;
  for (size_t i = 0; i < r.top.size(); ++i) {
    const LayoutResult& l = r.top[i];
    out << "\n#" << i + 1 << ": peak " << grouped(l.peak_bytes) << " B on stage " << l.worst_stage << " at " << l.peak.phase
        << " (parameters " << grouped(l.peak.split.parameters()) << ", gradients " << grouped(l.peak.split.gradients())
        << ", optimizer states " << grouped(l.peak.split.optimizer_states()) << ", other " << grouped(l.peak.split.other())
        << ", overheads " << grouped(l.peak_bytes - l.peak.bytes) << "); stages:";
    for (int64_t bytes : l.stage_bytes) out << ' ' << human_bytes(static_cast<double>(bytes));
    out << "\n  census step " << a.model;
    for (const std::string& arg : step_args(l, o)) out << ' ' << arg;
    out << '\n';
    print_time_terms(l, out);
  }
}

}  // namespace

Result<int64_t> parse_bytes(const std::string& flag, const std::string& text) {
  size_t end = 0;
  double number = 0;
  try {
    number = std::stod(text, &end);
  } catch (...) {
    return refuse(flag, echoed(text) + " is not a size; give one such as 80GiB, 141GB or a number of bytes");
  }
  std::string unit = text.substr(end);
  while (!unit.empty() && unit.front() == ' ') unit.erase(unit.begin());
  static const std::pair<const char*, double> kUnits[] = {
      {"", 1}, {"B", 1}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
      {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}};
  for (const auto& [name, scale] : kUnits) {
    if (unit != name) continue;
    const double bytes = number * scale;
    if (!std::isfinite(bytes) || bytes < 0 || bytes > 9.0e18)
      return refuse(flag, echoed(text) + " is not a size a device has; give one such as 80GiB");
    return static_cast<int64_t>(bytes);
  }
  return refuse(flag, echoed(text) + " has an unknown unit; use B, KB, MB, GB, TB, KiB, MiB, GiB or TiB");
}

CLI::App* add_plan_command(CLI::App& app, PlanArgs& a) {
  CLI::App* sub = app.add_subcommand("plan", "every parallel layout that fits on N devices, ranked by an estimated step time");
  sub->add_option("config", a.model, "a config.json path, or a shipped model name (census models)")->required();
  sub->add_option("--gpus", a.gpus, "devices in the run")->required();
  sub->add_option("--gpu-memory", a.gpu_memory, "memory of one device: 80GiB, 141GB, or bytes (default: the --device preset's)");
  sub->add_option("--gpus-per-node", a.gpus_per_node, "devices a node holds; TP, and TP x EP, stay inside one (default 8)");
  sub->add_option("--seq-length", a.seq_length, "tokens of one sequence, one micro-batch (default 4096)");
  sub->add_option("--global-batch", a.global_batch, "sequences a step (default: one a device)");
  sub->add_option("--device", a.device, "a preset: h100, h200, a100, b200, 910b, 910c (datasheet figures)");
  sub->add_option("--peak-tflops", a.peak_tflops, "dense bf16 TFLOPS of one device (replaces the preset's)");
  sub->add_option("--hbm-gbs", a.hbm_gbs, "HBM bandwidth, GB/s");
  sub->add_option("--link-gbs", a.link_gbs, "scale-up link (NVLink, HCCS) per device and direction, GB/s");
  sub->add_option("--nic-gbs", a.nic_gbs, "scale-out network per device and direction, GB/s");
  sub->add_option("--compute-efficiency", a.compute_efficiency, "share of the peak a compute-bound part reaches (default 0.5)");
  sub->add_option("--top", a.top, "layouts shown (default 5)");
  sub->add_option("--master-weights", a.master_weights, "bf16 (default) or fp32, as census step takes it");
  sub->add_option("--grad-dtype", a.grad_dtype, "bf16 (default) or fp32, as census step takes it");
  sub->add_option("--cuda-context", a.cuda_context, "the CUDA context, taken from each device's memory (default 0)");
  sub->add_option("--nccl-buffers", a.nccl_buffers, "NCCL's communicator buffers, taken from it (default 0)");
  sub->add_option("--fragmentation", a.fragmentation, "what the allocator loses to fragmentation, taken from it (default 0)");
  sub->add_option("--format", a.format, "table or json (default table)")->check(CLI::IsMember({"table", "json"}));
  sub->add_flag("--explain", a.explain, "every term of the time estimate, the rules that pruned, each layout's step command");
  return sub;
}

Result<ordered_json> plan_report_json(const PlanArgs& a, const ModelConfig& config) {
  auto planned = plan(a, config);
  CENSUS_TRY(planned);
  return plan_json(*planned, a);
}

int run_plan_command(const PlanArgs& a, std::ostream& out, std::ostream& err) {
  auto model = resolve_model(a.model);
  if (!model) return refuse_line(err, model.refusal().message());
  auto planned = plan(a, *model);
  if (!planned) return refuse_line(err, planned.refusal().message());
  std::ostringstream answer;
  if (a.format == "json") answer << plan_json(*planned, a).dump(2) << '\n';
  else print_plan(*planned, a, answer);
  out << answer.str();
  return 0;
}

}  // namespace census::cli
