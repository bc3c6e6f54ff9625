#include "cli/step_command.h"

#include <nlohmann/json.hpp>
#include <algorithm>
#include <fstream>
#include <atomic>
#include <optional>
#include <sstream>
#include <thread>

#include "step/step_census.h"
#include "cli/request.h"
#include "cli/shipped_models.h"
#include "report/table.h"
#include "models/config.h"

namespace census::cli {
namespace {

using nlohmann::ordered_json;

int refuse_line(std::ostream& err, const std::string& message) {
  err << "census: " << message << '\n';
  return 2;
}

ordered_json split_json(const StepSplit& s) {
  return {{"parameters", s.parameters()},
          {"gradients", s.gradients()},
          {"optimizer_states", s.optimizer_states()},
          {"other", s.other()},
          {"other_detail",
           {{"buffers", s[StepCategory::kBuffers]},
            {"inputs", s[StepCategory::kInputs]},
            {"param_grad_inflight", s[StepCategory::kParamGradInflight]},
            {"activations", s[StepCategory::kActivations]}}}};
}

ordered_json op_json(std::string_view op) { return op.empty() ? ordered_json(nullptr) : ordered_json(std::string(op)); }

ordered_json moment_json(const StepMoment& m) {
  if (m.bytes < 0) return nullptr;
  return {{"bytes", m.bytes}, {"phase", m.phase}, {"op", op_json(m.op)}, {"split", split_json(m.split)}};
}

// "F3" -> micro-batch 3, forward; "optimizer_step" -> no micro-batch.
ordered_json peak_json(const StepMoment& m) {
  ordered_json j = moment_json(m);
  const bool pass = m.phase.size() > 1 && (m.phase[0] == 'F' || m.phase[0] == 'B') && std::isdigit(m.phase[1]);
  j["micro_batch"] = pass ? ordered_json(std::stoll(m.phase.substr(1))) : ordered_json(nullptr);
  j["pass"] = pass ? ordered_json(m.phase[0] == 'F' ? "forward" : "backward") : ordered_json(m.phase);
  return j;
}

std::string schedule_name(const StepArgs& a) {
  if (a.pp == 1) return "none";
  return a.schedule == "interleaved" ? "interleaved, " + std::to_string(a.virtual_stages) + " chunks a stage" : a.schedule;
}

struct StageRun {
  int64_t stage;
  StepCensus step;
};

int64_t total_of(const StepCensus& s, const StepComposition& c) {
  const int64_t peak = c.composes() ? s.composed_peak.bytes : s.analysis.peak.bytes;
  return peak + overhead_bytes(c);
}

const StepMoment& reported_peak(const StepCensus& s, const StepComposition& c) {
  return c.composes() ? s.composed_peak : s.analysis.peak;
}

ordered_json stage_json(const StageRun& run, const StepArgs& a, const StepComposition& c) {
  const StepCensus& s = run.step;
  ordered_json j;
  j["stage"] = {{"index", run.stage},
                {"layers", {s.first_layer, s.end_layer}},
                {"first", run.stage == 0},
                {"last", run.stage == a.pp - 1}};
  j["schedule"] = s.schedule;
  j["peak"] = peak_json(s.analysis.peak);
  ordered_json other = moment_json(s.analysis.other_peak);
  other["live_total"] = s.analysis.other_peak.split.total();
  j["other_peak"] = other;
  j["forward_peak"] = moment_json(s.forward_peak);
  j["backward_peak"] = moment_json(s.backward_peak);
  j["optimizer_step_peak"] = moment_json(s.optimizer_step_peak);
  j["parameters"] = {{"count", s.parameter_count}, {"tensors", s.parameter_tensors}, {"bytes", s.parameter_bytes},
                     {"buffers_bytes", s.buffer_bytes}};
  j["gradients"] = {{"bytes_after_first_backward", s.gradient_bytes_after_first_backward},
                    {"bytes_after_last_backward", s.gradient_bytes_after_last_backward},
                    {"bytes_live_at_end", s.gradient_bytes_at_end}};
  j["optimizer"] = a.optimizer == "adamw" ? ordered_json{{"state_bytes", s.optimizer_state_bytes}} : ordered_json(nullptr);
  ordered_json phases = ordered_json::array();
  for (const StepPhase& p : s.analysis.phases)
    phases.push_back({{"name", p.name},
                      {"live_at_start", p.live_at_start},
                      {"peak_bytes", p.peak.bytes},
                      {"peak_op", op_json(p.peak.op)},
                      {"split_at_peak", split_json(p.peak.split)},
                      {"live_at_end", p.live_at_end}});
  j["phases"] = phases;
  if (c.composes()) {
    ordered_json terms = ordered_json::array();
    for (const ComposedTerm& t : composed_terms(s.composition, s.composed_peak))
      terms.push_back({{"name", t.name}, {"bytes", t.bytes}, {"formula", t.formula}});
    j["composed"] = {{"peak", peak_json(s.composed_peak)}, {"terms", terms}};
  }
  j["overheads"] = {{"cuda_context", c.cuda_context}, {"nccl_buffers", c.nccl_buffers},
                    {"fragmentation", c.fragmentation}};
  j["total_bytes"] = total_of(s, c);
  return j;
}

void print_split(Table& table, const StepSplit& split, bool detail) {
  table.add({"  parameters", grouped(split.parameters()), human_bytes(split.parameters()), ""});
  table.add({"  gradients", grouped(split.gradients()), human_bytes(split.gradients()), ""});
  table.add({"  optimizer_states", grouped(split.optimizer_states()), human_bytes(split.optimizer_states()), ""});
  table.add({"  other", grouped(split.other()), human_bytes(split.other()), ""});
  if (!detail) return;
  for (StepCategory c : {StepCategory::kActivations, StepCategory::kInputs, StepCategory::kParamGradInflight,
                         StepCategory::kBuffers})
    table.add({"    " + std::string(step_category_name(c)), grouped(split[c]), human_bytes(split[c]), ""});
}

// "0-9", or for model chunks "0-3 +4 chunks (to 67)": the first chunk's layers and how many follow.
std::string layers_cell(const StepCensus& s, const StepArgs& a) {
  if (a.schedule != "interleaved" || a.virtual_stages < 2)
    return std::to_string(s.first_layer) + "-" + std::to_string(s.end_layer - 1);
  const int64_t per_chunk = (s.end_layer - s.first_layer) / ((a.virtual_stages - 1) * a.pp + 1);
  return std::to_string(s.first_layer) + "-" + std::to_string(s.first_layer + per_chunk - 1) + " +" +
         std::to_string(a.virtual_stages - 1) + " chunks (to " + std::to_string(s.end_layer - 1) + ")";
}

std::string where(const StepMoment& m) {
  return "at " + m.phase + (m.op.empty() ? std::string() : ", " + std::string(m.op));
}

void print_stage(const StageRun& run, const StepArgs& a, const StepComposition& c, std::ostream& out) {
  const StepCensus& s = run.step;
  out << "stage " << run.stage << " of " << a.pp << ": layers " << layers_cell(s, a)
      << (run.stage == 0 ? ", the embedding" : "") << (run.stage == a.pp - 1 ? ", final norm, LM head and loss" : "")
      << "\nschedule:";
  for (const std::string& pass : s.schedule) out << ' ' << pass;
  out << '\n';
  Table table({"", "bytes", "", "where"});
  table.add({"peak (simulated)", grouped(s.analysis.peak.bytes), human_bytes(s.analysis.peak.bytes), where(s.analysis.peak)});
  print_split(table, s.analysis.peak.split, true);
  table.add({"other_peak", grouped(s.analysis.other_peak.bytes), human_bytes(s.analysis.other_peak.bytes),
             where(s.analysis.other_peak)});
  for (const auto& [name, m] : {std::pair{"forward_peak", &s.forward_peak}, std::pair{"backward_peak", &s.backward_peak},
                                std::pair{"optimizer_step_peak", &s.optimizer_step_peak}})
    if (m->bytes >= 0) table.add({name, grouped(m->bytes), human_bytes(m->bytes), "at " + m->phase});
  table.add({"parameters", grouped(s.parameter_bytes), human_bytes(s.parameter_bytes),
             grouped(s.parameter_count) + " in " + std::to_string(s.parameter_tensors) + " tensors"});
  if (a.optimizer == "adamw")
    table.add({"optimizer states", grouped(s.optimizer_state_bytes), human_bytes(s.optimizer_state_bytes), "AdamW"});
  if (c.composes()) {
    table.add({"peak (composed)", grouped(s.composed_peak.bytes), human_bytes(s.composed_peak.bytes), where(s.composed_peak)});
    for (const ComposedTerm& t : composed_terms(s.composition, s.composed_peak)) {
      if (t.name == "cuda_context") break;
      table.add({"  " + t.name, grouped(t.bytes), human_bytes(t.bytes), a.explain ? t.formula : ""});
    }
  }
  for (const auto& [name, bytes, flag] : {std::tuple{"cuda_context", c.cuda_context, "--cuda-context"},
                                          std::tuple{"nccl_buffers", c.nccl_buffers, "--nccl-buffers"},
                                          std::tuple{"fragmentation", c.fragmentation, "--fragmentation"}})
    table.add({std::string("+ ") + name, grouped(bytes), human_bytes(bytes), std::string("set by ") + flag});
  table.add({"total", grouped(total_of(s, c)), human_bytes(total_of(s, c)), ""});
  table.print(out);
  if (a.explain) {
    out << "\nat the simulated peak, what is not a parameter, gradient, optimizer state or buffer (op@phase):\n";
    Table held({"category:op@phase", "bytes", ""});
    for (const StepHolder& h : s.analysis.peak_other_by_op) held.add({h.label, grouped(h.bytes), human_bytes(h.bytes)});
    held.print(out);
  }
  out << '\n';
  Table phases({"phase", "live_at_start", "peak", "peak_op", "live_at_end"});
  for (const StepPhase& p : s.analysis.phases)
    phases.add({p.name, grouped(p.live_at_start), grouped(p.peak.bytes), std::string(p.peak.op), grouped(p.live_at_end)});
  phases.print(out);
}

}  // namespace

CLI::App* add_step_command(CLI::App& app, StepArgs& a) {
  CLI::App* sub = app.add_subcommand("step", "one rank's whole training step: peak memory, where, and its split");
  sub->add_option("config", a.model, "a config.json path, or a shipped model name (census models)")->required();
  sub->add_option("--seq-length", a.seq_length, "tokens of each sequence (default 4096)");
  sub->add_option("--micro-batch-size", a.micro_batch_size, "sequences of each micro-batch (default 1)");
  sub->add_option("--micro-batches", a.micro_batches, "micro-batches accumulated per step (default 1)");
  sub->add_option("--pp", a.pp, "pipeline stages (default 1)");
  sub->add_option("--stage", a.stage, "the pipeline stage to run (default: every stage)");
  sub->add_option("--schedule", a.schedule, "pipeline schedule: 1f1b (default), gpipe, or interleaved (with --virtual-stages)")
      ->check(CLI::IsMember({"1f1b", "gpipe", "interleaved"}));
  sub->add_option("--virtual-stages", a.virtual_stages, "model chunks per stage, for --schedule interleaved (Megatron's order)");
  sub->add_option("--recompute", a.recompute, "activation checkpointing of every layer: none, selective, full")
      ->check(CLI::IsMember({"none", "selective", "full"}));
  sub->add_option("--optimizer", a.optimizer, "adamw (default: its first step and zero_grad) or none")
      ->check(CLI::IsMember({"adamw", "none"}));
  sub->add_option("--tp", a.tp, "tensor-parallel degree: the rank's layers as tp_config holds them (default 1)");
  sub->add_option("--dp", a.dp, "data-parallel degree, for --zero (default 1)");
  sub->add_option("--zero", a.zero, "ZeRO stage: 0 (default), 1 (optimizer states / DP), 2 (and gradients), 3 (and parameters)")
      ->check(CLI::IsMember({0, 1, 2, 3}));
  sub->add_option("--cp", a.cp, "context-parallel degree: the rank's S / C tokens, plus the K/V its ring receives (default 1)");
  sub->add_option("--ep", a.ep, "expert-parallel degree: each MoE layer's num_experts / E experts on the rank (default 1)");
  sub->add_option("--master-weights", a.master_weights, "bf16 (default) or fp32 (fp32 master copy and moments)")
      ->check(CLI::IsMember({"bf16", "fp32"}));
  sub->add_option("--grad-dtype", a.grad_dtype, "bf16 (default) or fp32 (Megatron's main_grad)")
      ->check(CLI::IsMember({"bf16", "fp32"}));
  sub->add_option("--experts-implementation", a.experts_implementation, "grouped_mm (default) or eager");
  sub->add_option("--cuda-context", a.cuda_context, "bytes of the CUDA context, added to the peak (default 0)");
  sub->add_option("--nccl-buffers", a.nccl_buffers, "bytes of NCCL's communicator buffers, added (default 0)");
  sub->add_option("--fragmentation", a.fragmentation, "bytes the allocator loses to fragmentation, added (default 0)");
  sub->add_option("--format", a.format, "table or json (default table)")->check(CLI::IsMember({"table", "json"}));
  sub->add_flag("--explain", a.explain, "each composed term's formula, and what the peak holds by op");
  return sub;
}

namespace {

struct StepRuns {
  ModelConfig config;
  StepComposition composition;
  std::vector<StageRun> runs;
  size_t worst = 0;
};

Status check_names(const StepArgs& a) {
  auto one_of = [](const std::string& flag, const std::string& value, std::initializer_list<const char*> names) -> Status {
    std::string listed;
    for (const char* name : names) {
      if (value == name) return {};
      listed += std::string(listed.empty() ? "" : ", ") + name;
    }
    return refuse(flag, "'" + value + "' is not known; use " + listed);
  };
  CENSUS_TRY(one_of("--schedule", a.schedule, {"1f1b", "gpipe", "interleaved"}));
  CENSUS_TRY(one_of("--recompute", a.recompute, {"none", "selective", "full"}));
  CENSUS_TRY(one_of("--optimizer", a.optimizer, {"adamw", "none"}));
  CENSUS_TRY(one_of("--master-weights", a.master_weights, {"bf16", "fp32"}));
  CENSUS_TRY(one_of("--grad-dtype", a.grad_dtype, {"bf16", "fp32"}));
  if (a.pp < 1) return refuse("--pp", std::to_string(a.pp) + " is not a positive degree; give one");
  for (const auto& [flag, value] : {std::pair{"--cuda-context", a.cuda_context}, std::pair{"--nccl-buffers", a.nccl_buffers},
                                    std::pair{"--fragmentation", a.fragmentation}})
    if (value < 0) return refuse(flag, std::to_string(value) + " bytes is negative; give 0 or more");
  return {};
}

Result<StepRuns> run_step(const StepArgs& a, const ModelConfig& model) {
  CENSUS_TRY(check_names(a));
  Request request;
  request.command = "step";
  request.model_name = a.model;
  request.config = model;
  request.seq_length = a.seq_length;
  request.tp = a.tp;
  request.experts_implementation = a.experts_implementation;
  CENSUS_TRY(check_request(request));
  CENSUS_TRY(apply_options(request));

  StepOptions o;
  o.seq_length = a.seq_length;
  o.micro_batch_size = a.micro_batch_size;
  o.micro_batches = a.micro_batches;
  o.pipeline_stages = a.pp;
  o.schedule = a.schedule == "gpipe"         ? PipelineSchedule::kGPipe
               : a.schedule == "interleaved" ? PipelineSchedule::kInterleaved
                                             : PipelineSchedule::k1F1B;
  o.virtual_stages = a.virtual_stages;
  o.recompute = a.recompute == "selective" ? Recompute::kSelective
                : a.recompute == "full"    ? Recompute::kFull
                                           : Recompute::kNone;
  o.optimizer = a.optimizer == "adamw" ? StepOptimizer::kAdamW : StepOptimizer::kNone;
  o.tensor_parallel = a.tp;
  o.context_parallel = a.cp;
  o.expert_parallel = a.ep;
  o.composition.data_parallel = a.dp;
  o.composition.context_parallel = a.cp;
  o.composition.zero = static_cast<int>(a.zero);
  o.composition.fp32_master_weights = a.master_weights == "fp32";
  o.composition.fp32_gradients = a.grad_dtype == "fp32";
  o.composition.cuda_context = a.cuda_context;
  o.composition.nccl_buffers = a.nccl_buffers;
  o.composition.fragmentation = a.fragmentation;

  StepRuns result{request.config, o.composition, {}, 0};
  std::vector<int64_t> stages;  // --stage's, else every stage
  if (a.stage != -1) stages.push_back(a.stage);
  for (int64_t r = 0; a.stage == -1 && r < a.pp; ++r) stages.push_back(r);
  // The stages are independent steps, each in its own Session: they run on as many threads as there
  // are cores (a Session and its arena are the thread's own).
  std::vector<std::optional<Result<StepCensus>>> steps(stages.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < stages.size(); i = next++) {
      StepOptions mine = o;
      mine.stage = stages[i];
      steps[i].emplace(census_step(result.config, mine));
    }
  };
  const size_t threads = std::min<size_t>(stages.size(), std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& thread : pool) thread.join();
  for (size_t i = 0; i < stages.size(); ++i) {
    CENSUS_TRY(*steps[i]);
    result.runs.push_back({stages[i], steps[i]->take()});
  }
  for (size_t i = 0; i < result.runs.size(); ++i)
    if (total_of(result.runs[i].step, o.composition) > total_of(result.runs[result.worst].step, o.composition))
      result.worst = i;
  return result;
}

ordered_json runs_json(const StepRuns& r, const StepArgs& a) {
  if (r.runs.size() == 1) return stage_json(r.runs.front(), a, r.composition);
  ordered_json all = ordered_json::array();
  for (const StageRun& run : r.runs) all.push_back(stage_json(run, a, r.composition));
  return {{"stages", all}, {"worst_stage", r.runs[r.worst].stage},
          {"total_bytes", total_of(r.runs[r.worst].step, r.composition)}};
}

}  // namespace

Result<ordered_json> step_report_json(const StepArgs& a, const ModelConfig& config) {
  auto runs = run_step(a, config);
  CENSUS_TRY(runs);
  return runs_json(*runs, a);
}

int run_step_command(const StepArgs& a, std::ostream& out, std::ostream& err) {
  auto model = resolve_model(a.model);
  if (!model) return refuse_line(err, model.refusal().message());
  auto result = run_step(a, *model);
  if (!result) return refuse_line(err, result.refusal().message());
  const StepRuns& r = *result;
  const std::vector<StageRun>& runs = r.runs;
  const size_t worst = r.worst;
  const StepComposition& composition = r.composition;

  std::ostringstream answer;  // printed whole or not at all
  if (a.format == "json") {
    answer << runs_json(r, a).dump(2) << '\n';
    out << answer.str();
    return 0;
  }
  const ModelConfig& c = r.config;
  answer << a.model << " (" << c.model_type << "): one rank's training step, " << a.seq_length << " tokens x "
         << (a.micro_batch_size > 1 ? std::to_string(a.micro_batch_size) + " sequences x " : "") << a.micro_batches
         << " micro-batch" << (a.micro_batches > 1 ? "es" : "") << ", PP " << a.pp << " ("
         << schedule_name(a) << "), TP " << a.tp << (a.cp > 1 ? ", CP " + std::to_string(a.cp) : "")
         << (a.ep > 1 ? ", EP " + std::to_string(a.ep) : "") << ", recompute " << a.recompute << ", optimizer " << a.optimizer;
  const bool data_parallel_terms =
      composition.zero > 0 || composition.fp32_master_weights || composition.fp32_gradients;
  if (data_parallel_terms)
    answer << ", DP " << a.dp << " ZeRO-" << a.zero << ", master weights " << a.master_weights << ", grads "
           << a.grad_dtype;
  answer << ", bf16 parameters\n";
  if (a.explain) {
    // The terms that shape what is simulated, by name.
    const ModelConfig rank = tp_config(c, a.tp);
    answer << "tensor_parallel: the rank's layers as tp_config holds them at TP " << a.tp << ": attention heads "
           << c.num_attention_heads << " / " << a.tp << " = " << rank.num_attention_heads << ", KV heads "
           << c.num_key_value_heads << " -> " << rank.num_key_value_heads << ", intermediate " << c.intermediate_size
           << " / " << a.tp << " = " << rank.intermediate_size;
    if (c.moe.moe_intermediate_size > 0)
      answer << ", expert width " << c.moe.moe_intermediate_size << " / " << a.tp << " = " << rank.moe.moe_intermediate_size
             << (a.ep > 1 ? " (the rank's " + std::to_string(c.moe.num_experts / a.ep) + " experts)"
                          : " (all " + std::to_string(c.moe.num_experts) + " experts)");
    answer << "; the norms, the router, the embedding, the final norm, the LM head and the loss whole on every rank "
              "(no sequence parallelism, no vocabulary-parallel head)\n";
    if (a.cp > 1)
      answer << "context_parallel: CP " << a.cp << ": the rank runs " << a.seq_length << " / " << a.cp << " = "
             << a.seq_length / a.cp << " tokens of each micro-batch (simulated); its ring attention receives the "
             << "other shards' K/V, (" << a.cp << " - 1) x " << a.seq_length / a.cp << " tokens x 2 x "
             << rank.num_key_value_heads << " KV heads x " << rank.head_dim << " x 2 B = "
             << grouped((a.cp - 1) * (a.seq_length / a.cp) * 2 * rank.num_key_value_heads * rank.head_dim * 2)
             << " B for the layer computing, composed during every pass\n";
    if (a.ep > 1)
      answer << "expert_parallel: EP " << a.ep << ": each MoE layer holds " << c.moe.num_experts << " / " << a.ep
             << " = " << c.moe.num_experts / a.ep << " experts (simulated: their parameters, gradients and states), "
             << "the router whole; the experts run every token-expert pair of the rank's tokens, "
             << "the pairs routed elsewhere masked, as Transformers' expert-parallel plan runs them\n";
    if (c.tie_word_embeddings)
      answer << "tie_word_embeddings: a stage holding the embedding and the head runs the head over the embedding's "
                "weight (one parameter, its two gradients summed into one .grad); a pipeline's last stage holds "
                "its own copy as its head\n";
    answer << "pipeline: " << c.num_hidden_layers << " layers / " << a.pp << " stages = " << c.num_hidden_layers / a.pp
           << " per stage; stage 0 holds the embedding, the last the final norm, head and loss\n";
    if (data_parallel_terms)
      answer << "data_parallel: DP " << a.dp << ", ZeRO-" << a.zero
             << ": the simulated step's storages counted at their category's share and its peak found again "
                "(the terms below)\n";
  }
  if (runs.size() > 1) {
    Table summary({"stage", "layers", "peak", "phase", "parameters", "gradients", "optimizer_states", "other", "total"});
    for (const StageRun& run : runs) {
      const StepMoment& m = reported_peak(run.step, composition);
      summary.add({std::to_string(run.stage),
                   layers_cell(run.step, a), grouped(m.bytes),
                   m.phase, grouped(m.split.parameters()), grouped(m.split.gradients()),
                   grouped(m.split.optimizer_states()), grouped(m.split.other()),
                   grouped(total_of(run.step, composition))});
    }
    summary.print(answer);
    answer << "\nthe stage that needs the most:\n";
  }
  print_stage(runs[worst], a, composition, answer);
  out << answer.str();
  return 0;
}

}  // namespace census::cli
