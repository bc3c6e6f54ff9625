#include "cli/step_command.h"

#include <nlohmann/json.hpp>
#include <algorithm>
#include <fstream>
#include <optional>
#include <sstream>

#include "cli/fine_tuning_options.h"
#include "cli/from_file.h"
#include "cli/options.h"
#include "step/step_census.h"
#include "cli/request.h"
#include "cli/shipped_models.h"
#include "cli/step_allocator.h"
#include "report/table.h"
#include "models/config.h"
#include "nn/float8_training.h"
#include "nn/lora.h"
#include "step/lora_choice.h"
#include "util/checked.h"
#include "util/parallel.h"

namespace census::cli {
namespace {

using nlohmann::ordered_json;

constexpr IntegerRule kMicroBatchesRule{"--micro-batches", 1, kLargestMicroBatches,
                                        "the most micro-batches a step accumulates"};
// Decoder layers of a first or last pipeline stage; 0 (the default) leaves the split even.
constexpr IntegerRule stage_layers_rule(const char* flag) {
  return {flag, 0, kLargestLayerCount, "the layers of the largest config (2^20)"};
}
constexpr IntegerRule kStageRule{"--stage", 0, kLargestDegree - 1, "the last stage of the largest pipeline"};
constexpr IntegerRule kZeroRule{"--zero", 0, 3, "the last ZeRO stage"};
// --world: 0 (left out) or the ranks of the whole mesh.
constexpr IntegerRule kWorldRule = degree_rule("--world");

int refuse_line(std::ostream& err, const std::string& message) {
  err << "census: " << message << '\n';
  return 2;
}

// FSDP2's parts of `other` are listed where FSDP2 runs (as the parallel oracle lists them), and left out
// of every other step's record (as the step oracle's has none).
ordered_json split_json(const StepSplit& s, bool fsdp) {
  ordered_json detail = {{"buffers", s[StepCategory::kBuffers]},
                         {"inputs", s[StepCategory::kInputs]},
                         {"param_grad_inflight", s[StepCategory::kParamGradInflight]}};
  if (fsdp) {
    detail["fsdp_unsharded_params"] = s[StepCategory::kFsdpUnshardedParams];
    detail["fsdp_all_gather_buffers"] = s[StepCategory::kFsdpAllGatherBuffers];
    detail["fsdp_unsharded_grads"] = s[StepCategory::kFsdpUnshardedGrads];
    detail["fsdp_reduce_scatter_buffers"] = s[StepCategory::kFsdpReduceScatterBuffers];
  }
  detail["activations"] = s[StepCategory::kActivations];
  return {{"parameters", s.parameters()},
          {"gradients", s.gradients()},
          {"optimizer_states", s.optimizer_states()},
          {"other", s.other()},
          {"other_detail", detail}};
}

ordered_json op_json(std::string_view op) { return op.empty() ? ordered_json(nullptr) : ordered_json(std::string(op)); }

ordered_json moment_json(const StepMoment& m, bool fsdp) {
  if (m.bytes < 0) return nullptr;
  return {{"bytes", m.bytes}, {"phase", m.phase}, {"op", op_json(m.op)}, {"split", split_json(m.split, fsdp)}};
}

// "F3" -> micro-batch 3, forward; "optimizer_step" -> no micro-batch.
ordered_json peak_json(const StepMoment& m, bool fsdp) {
  ordered_json j = moment_json(m, fsdp);
  const bool pass = m.phase.size() > 1 && (m.phase[0] == 'F' || m.phase[0] == 'B') && std::isdigit(m.phase[1]);
  j["micro_batch"] = pass ? ordered_json(std::stoll(m.phase.substr(1))) : ordered_json(nullptr);
  j["pass"] = pass ? ordered_json(m.phase[0] == 'F' ? "forward" : "backward") : ordered_json(m.phase);
  return j;
}


// --optimizer's optimizer (its names checked by check_names).
StepOptimizer optimizer_of(const StepArgs& a) { return optimizer_named(a.optimizer).value_or(StepOptimizer::kNone); }

// --optimizer-impl's form; left out, empty: the optimizer's own default on CUDA.
std::optional<nn::OptimizerImpl> optimizer_impl_of(const StepArgs& a) {
  if (a.optimizer_impl == "fused") return nn::OptimizerImpl::kFused;
  if (a.optimizer_impl == "for-loop") return nn::OptimizerImpl::kForLoop;
  if (a.optimizer_impl == "foreach") return nn::OptimizerImpl::kForEach;
  return std::nullopt;
}

// The optimizer as the answer names it: "adamw (foreach)", "adamw8bit in the backward", "none".
std::string optimizer_label(const StepArgs& a) {
  const StepOptimizer optimizer = optimizer_of(a);
  std::string label = a.optimizer;
  if (!optimizer_forms(optimizer).empty())
    label += " (" + std::string(nn::optimizer_impl_name(optimizer_impl_or_default(optimizer, optimizer_impl_of(a), a.cpu_offload))) + ")";
  return a.optimizer_in_backward ? label + " in the backward" : label;
}

// Which step is priced: "steady" (the second and every later one, the default) or "first". A step
// without an optimizer is the same every time: "steady".
// The loss as given, else the run's default: Liger's fused linear cross-entropy under its patch, which binds
// it with the kernels; Transformers' own otherwise.
std::string loss_of(const StepArgs& a) { return !a.loss.empty() ? a.loss : a.liger ? "liger-flce" : "hf"; }

std::string step_name(const StepArgs& a) { return a.first_step ? "first" : "steady"; }

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

// The ranks of the mesh --dp x --tp x --pp x --cp, or -1 where a degree is not one or the mesh has more
// ranks than a run has (2^20; four degrees of up to 2^20 each would pass 64 bits).
int64_t mesh_ranks(const StepArgs& a) {
  int64_t ranks = 1;
  for (int64_t degree : {a.dp, a.tp, a.pp, a.cp}) {
    if (degree < 1 || degree > kLargestDegree) return -1;
    ranks *= degree;  // at most 2^20 x 2^20
    if (ranks > kLargestDegree) return -1;
  }
  return ranks;
}

// What each parallel degree means on this rank, by the names of the semantics it runs.
ordered_json parallel_json(const StepArgs& a) {
  const bool dtensor = a.tp > 1 && (a.sequence_parallel || a.loss_parallel);
  ordered_json j;
  const int64_t world = mesh_ranks(a);
  j["world_size"] = world < 0 ? ordered_json(nullptr) : ordered_json(world);
  j["data_parallel"] = {
      {"degree", a.dp},
      {"semantics", a.fsdp       ? "fsdp2"
                    : a.zero > 0 ? "zero-" + std::to_string(a.zero) + " (composed)"
                                 : std::string("replicated")}};
  if (a.fsdp)
    j["fsdp"] = {{"units", a.fsdp_wrap == "torchtitan"
                               ? "fully_shard of the embedding, each decoder layer, [final norm, head], then the root "
                                 "(no parameter of its own)"
                               : "fully_shard per decoder layer, then the root (embedding, final norm, head)"},
                 {"reshard_after_forward", a.reshard_after_forward},
                 {"mp_policy",
                  {{"param_dtype", "bfloat16"},
                   {"reduce_dtype", a.master_weights == "fp32" ? "float32" : "bfloat16"},
                   {"sharded_dtype", a.master_weights == "fp32" ? "float32" : "bfloat16"}}},
                 {"prefetch", "implicit in forward, one unit in backward"},
                 {"cpu_offload", a.cpu_offload}};
  j["tensor_parallel"] = {{"degree", a.tp},
                          {"semantics", a.tp == 1  ? "none"
                                        : dtensor ? "dtensor (torchtitan's Llama plan on Transformers' names)"
                                                  : "tp_config (the layers' heads and widths divided; norms, "
                                                    "embedding, head and loss whole)"},
                          {"sequence_parallel", a.sequence_parallel},
                          {"loss_parallel", a.loss_parallel}};
  j["pipeline_parallel"] = {{"degree", a.pp}, {"schedule", a.pp == 1 ? "none" : a.schedule}};
  j["context_parallel"] = {{"degree", a.cp}, {"semantics", a.cp == 1 ? "none" : "ring (its received K/V composed)"}};
  j["expert_parallel"] = {{"degree", a.ep},
                          {"dispatch", a.ep == 1 ? "none" : "transformers_masking (every token-expert pair, the "
                                                            "pairs routed elsewhere masked)"}};
  return j;
}

ordered_json stage_json(const StageRun& run, const StepArgs& a, const StepComposition& c, const ModelConfig& config) {
  const StepCensus& s = run.step;
  ordered_json j;
  j["step"] = step_name(a);
  j["loss"] = loss_of(a);
  j["liger"] = a.liger;
  j["fp8"] = a.fp8.empty() ? ordered_json(nullptr)
                           : ordered_json({{"recipe", a.fp8}, {"head", a.fp8_skip_head ? "bf16" : "fp8"}});
  j["offload_activations"] = a.offload_activations.empty() ? ordered_json(nullptr) : ordered_json(a.offload_activations);
  if (const std::optional<nn::LoraConfig> lora = lora_config_of(a)) {
    j["lora"] = {{"r", lora->r},
                 {"alpha", lora->alpha},
                 {"scaling", lora->scaling()},
                 {"dropout", lora->dropout},
                 {"targets", lora_targets_json(*lora, config)},
                 {"adapter_dtype", lora->dtype == DType::kBFloat16 ? "bfloat16" : "float32"},
                 {"use_dora", lora->use_dora},
                 {"modules_to_save", lora->modules_to_save},
                 {"adapted_linears", s.adapted_linears},
                 {"trainable_parameters", {{"count", s.trainable_parameter_count}, {"bytes", s.trainable_parameter_bytes}}},
                 {"frozen_parameters",
                  {{"count", s.parameter_count - s.trainable_parameter_count},
                   {"bytes", s.parameter_bytes - s.trainable_parameter_bytes}}}};
  } else {
    j["lora"] = nullptr;
  }
  j["autocast"] = a.autocast.empty() ? ordered_json(nullptr)
                                     : ordered_json{{"dtype", "bfloat16"}, {"op_lists", "cuda"},
                                                      {"weights", a.load_dtype == "bf16" ? "bfloat16" : "float32"},
                                                      {"outputs", "accelerate's convert_outputs_to_fp32"}};
  if (const std::optional<nn::Bnb4bitConfig> q = quantize_config_of(a)) {
    j["quantization"] = {{"method", "bitsandbytes 4-bit"},
                         {"quant_type", nn::bnb_4bit_type_name(q->quant_type)},
                         {"double_quant", q->double_quant},
                         {"compute_dtype", dtype_name(q->compute_dtype)},
                         {"quant_storage", dtype_name(q->quant_storage)},
                         {"bitsandbytes", nn::bnb_version_name(q->version)},
                         {"prepare_kbit", q->prepare_kbit},
                         {"quantized_linears", s.quantized_linears},
                         {"packed_weight_bytes", s.quantized_weight_bytes},
                         {"quantization_state_bytes", s.quantization_state_bytes}};
  } else {
    j["quantization"] = nullptr;
  }
  j["parallel"] = parallel_json(a);
  j["stage"] = {{"index", run.stage},
                {"layers", {s.first_layer, s.end_layer}},
                {"first", run.stage == 0},
                {"last", run.stage == a.pp - 1}};
  j["schedule"] = s.schedule;
  j["peak"] = peak_json(s.analysis.peak, a.fsdp);
  ordered_json other = moment_json(s.analysis.other_peak, a.fsdp);
  other["live_total"] = s.analysis.other_peak.split.total();
  j["other_peak"] = other;
  j["forward_peak"] = moment_json(s.forward_peak, a.fsdp);
  j["backward_peak"] = moment_json(s.backward_peak, a.fsdp);
  j["optimizer_step_peak"] = moment_json(s.optimizer_step_peak, a.fsdp);
  j["parameters"] = {{"count", s.parameter_count}, {"tensors", s.parameter_tensors}, {"bytes", s.parameter_bytes},
                     {"buffers_bytes", s.buffer_bytes}};
  j["gradients"] = {{"bytes_after_first_backward", s.gradient_bytes_after_first_backward},
                    {"bytes_after_last_backward", s.gradient_bytes_after_last_backward},
                    {"bytes_live_at_end", s.gradient_bytes_at_end}};
  if (const StepOptimizer optimizer = optimizer_of(a); optimizer != StepOptimizer::kNone) {
    j["optimizer"] = {{"name", a.optimizer}};
    if (!optimizer_forms(optimizer).empty())
      j["optimizer"]["implementation"] =
          std::string(nn::optimizer_impl_name(optimizer_impl_or_default(optimizer, optimizer_impl_of(a), a.cpu_offload)));
    j["optimizer"]["in_backward"] = a.optimizer_in_backward;
    j["optimizer"]["state_bytes"] = s.optimizer_state_bytes;
    j["optimizer"]["unified_memory_bytes"] = s.optimizer_unified_memory_bytes;
  } else {
    j["optimizer"] = nullptr;
  }
  if (s.host) {
    const OffloadCounts& n = s.offload;
    j["host"] = {{"peak_bytes", s.host->peak_bytes},
                 {"peak_phase", nullptr},
                 {"peak_split", nullptr},
                 {"live_at_end_bytes", s.host->live_bytes},
                 {"pinned_peak_bytes", s.host->peak_bytes},
                 {"pinned_reserved_bytes", s.host->pinned_reserved_bytes},
                 {"offloaded_bytes", s.host->offloaded_bytes},
                 {"brought_back_bytes", s.host->brought_back_bytes},
                 {"saves",
                  {{"packed", n.packs},
                   {"offloaded", n.offloaded},
                   {"copied_before_offload", n.copied_before_offload},
                   {"kept_deduplicated", n.deduplicated},
                   {"kept_small", n.kept_small},
                   {"kept_parameter", n.kept_parameter},
                   {"brought_back", n.brought_back}}}};
  } else if (const std::optional<StepHostAnalysis>& h = s.offloaded_to_host) {
    j["host"] = {{"peak_bytes", h->peak_bytes},
                 {"peak_phase", h->peak_phase.empty() ? ordered_json(nullptr) : ordered_json(h->peak_phase)},
                 {"peak_split",
                  {{"parameters", h->peak_split.parameters()},
                   {"gradients", h->peak_split.gradients()},
                   {"optimizer_states", h->peak_split.optimizer_states()},
                   {"other", h->peak_split.other()}}},
                 {"live_at_end_bytes", h->live_at_end},
                 {"pinned_peak_bytes", h->pinned_peak_bytes},
                 {"pinned_reserved_bytes", h->pinned_reserved_bytes},
                 {"offloaded_bytes", h->copied_to_host_bytes},
                 {"brought_back_bytes", h->copied_to_device_bytes},
                 {"saves", nullptr}};
  } else {
    j["host"] = nullptr;
  }
  ordered_json phases = ordered_json::array();
  for (const StepPhase& p : s.analysis.phases)
    phases.push_back({{"name", p.name},
                      {"live_at_start", p.live_at_start},
                      {"peak_bytes", p.peak.bytes},
                      {"peak_op", op_json(p.peak.op)},
                      {"split_at_peak", split_json(p.peak.split, a.fsdp)},
                      {"live_at_end", p.live_at_end}});
  j["phases"] = phases;
  if (c.composes()) {
    ordered_json terms = ordered_json::array();
    for (const ComposedTerm& t : composed_terms(s.composition, s.composed_peak))
      terms.push_back({{"name", t.name}, {"bytes", t.bytes}, {"formula", t.formula}});
    j["composed"] = {{"peak", peak_json(s.composed_peak, a.fsdp)}, {"terms", terms}};
  }
  j["overheads"] = {{"cuda_context", c.cuda_context}, {"nccl_buffers", c.nccl_buffers},
                    {"fragmentation", c.fragmentation}};
  j["total_bytes"] = total_of(s, c);
  if (s.allocator) j["allocator"] = allocator_json(*s.allocator, a);
  return j;
}

void print_split(Table& table, const StepSplit& split, bool detail) {
  table.add({"  parameters", grouped(split.parameters()), human_bytes(split.parameters()), ""});
  table.add({"  gradients", grouped(split.gradients()), human_bytes(split.gradients()), ""});
  table.add({"  optimizer_states", grouped(split.optimizer_states()), human_bytes(split.optimizer_states()), ""});
  table.add({"  other", grouped(split.other()), human_bytes(split.other()), ""});
  if (!detail) return;
  for (StepCategory c : {StepCategory::kActivations, StepCategory::kInputs, StepCategory::kParamGradInflight,
                         StepCategory::kBuffers, StepCategory::kFsdpUnshardedParams, StepCategory::kFsdpAllGatherBuffers,
                         StepCategory::kFsdpUnshardedGrads, StepCategory::kFsdpReduceScatterBuffers}) {
    const bool fsdp = c != StepCategory::kActivations && c != StepCategory::kInputs &&
                      c != StepCategory::kParamGradInflight && c != StepCategory::kBuffers;
    if (fsdp && split[c] == 0) continue;  // FSDP2's buffers, shown where the step holds some
    table.add({"    " + std::string(step_category_name(c)), grouped(split[c]), human_bytes(split[c]), ""});
  }
}

// "0-9", or for model chunks "0-3 +4 chunks (to 67)": the first chunk's layers and how many follow.
std::string layers_cell(const StepCensus& s) {
  const LayerRange& first = s.chunks.front();
  std::string cell = std::to_string(first.begin) + "-" + std::to_string(first.end - 1);
  if (s.chunks.size() < 2) return cell;
  return cell + " +" + std::to_string(s.chunks.size() - 1) + " chunks (to " + std::to_string(s.end_layer - 1) + ")";
}

std::string where(const StepMoment& m) {
  return "at " + m.phase + (m.op.empty() ? std::string() : ", " + std::string(m.op));
}

void print_stage(const StageRun& run, const StepArgs& a, const StepComposition& c, std::ostream& out) {
  const StepCensus& s = run.step;
  out << "stage " << run.stage << " of " << a.pp << ": layers " << layers_cell(s)
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
  if (uses_lora(a)) {
    const int64_t frozen = s.parameter_bytes - s.trainable_parameter_bytes;
    table.add({"  of them adapters", grouped(s.trainable_parameter_bytes), human_bytes(s.trainable_parameter_bytes),
               grouped(s.trainable_parameter_count) + " trained, on " + std::to_string(s.adapted_linears) +
                   " Linears: the gradients and optimizer states are theirs alone"});
    table.add({"  of them frozen base", grouped(frozen), human_bytes(frozen),
               grouped(s.parameter_count - s.trainable_parameter_count) + ", no gradient and no optimizer state"});
  }
  if (s.quantized_linears > 0) {
    table.add({"  of them 4-bit weights", grouped(s.quantized_weight_bytes), human_bytes(s.quantized_weight_bytes),
               "packed, two to a byte, on " + std::to_string(s.quantized_linears) + " Linear4bit"});
    table.add({"buffers", grouped(s.buffer_bytes), human_bytes(s.buffer_bytes), "the model's, whole step"});
    table.add({"  of them quantization state", grouped(s.quantization_state_bytes),
               human_bytes(s.quantization_state_bytes), "absmax, codes and the second level's, beside each weight"});
  }
  if (optimizer_of(a) != StepOptimizer::kNone) {
    table.add({"optimizer states", grouped(s.optimizer_state_bytes), human_bytes(s.optimizer_state_bytes),
               optimizer_label(a) + (a.first_step ? ", made in its first step" : ", alive from the start") +
                   (a.cpu_offload ? ", on the host" : "")});
    if (s.optimizer_unified_memory_bytes > 0)
      table.add({"  of them paged", grouped(s.optimizer_unified_memory_bytes),
                 human_bytes(s.optimizer_unified_memory_bytes),
                 "in unified memory (cudaMallocManaged), outside the caching allocator: in no device figure"});
  }
  if (s.host) {
    table.add({"host (pinned)", grouped(s.host->peak_bytes), human_bytes(s.host->peak_bytes),
               "activations offloaded: " + grouped(s.offload.offloaded) + " of " + grouped(s.offload.packs) +
                   " saves, in no device figure"});
    table.add({"  pinned reserved", grouped(s.host->pinned_reserved_bytes), human_bytes(s.host->pinned_reserved_bytes),
               "the caching host allocator's blocks: each a power of two, kept for reuse"});
  }
  if (const std::optional<StepHostAnalysis>& h = s.offloaded_to_host) {
    table.add({"host", grouped(h->peak_bytes), human_bytes(h->peak_bytes),
               "FSDP2's CPU offloading, in no device figure: its peak" +
                   (h->peak_phase.empty() ? std::string() : " at " + h->peak_phase)});
    table.add({"  parameters", grouped(h->peak_split.parameters()), human_bytes(h->peak_split.parameters()), "the shards"});
    table.add({"  gradients", grouped(h->peak_split.gradients()), human_bytes(h->peak_split.gradients()), ""});
    table.add({"  optimizer_states", grouped(h->peak_split.optimizer_states()),
               human_bytes(h->peak_split.optimizer_states()), ""});
    table.add({"  other", grouped(h->peak_split.other()), human_bytes(h->peak_split.other()),
               "the optimizer step's temporaries, a later micro-batch's gradient copies"});
    table.add({"  pinned (most)", grouped(h->pinned_peak_bytes), human_bytes(h->pinned_peak_bytes),
               "the shards and the first micro-batch's gradients"});
    table.add({"  pinned reserved", grouped(h->pinned_reserved_bytes), human_bytes(h->pinned_reserved_bytes),
               "the caching host allocator's blocks: each a power of two, kept for reuse"});
  }
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
  if (s.allocator) print_allocator(*s.allocator, a, out);
  out << '\n';
  Table phases({"phase", "live_at_start", "peak", "peak_op", "live_at_end"});
  for (const StepPhase& p : s.analysis.phases)
    phases.add({p.name, grouped(p.live_at_start), grouped(p.peak.bytes), std::string(p.peak.op), grouped(p.live_at_end)});
  phases.print(out);
}

}  // namespace

CLI::App* add_step_command(CLI::App& app, StepArgs& a) {
  CLI::App* sub = app.add_subcommand("step", "one rank's whole training step: peak memory, where, and its split");
  sub->add_option("config", a.model,
                  "a config.json path, or a shipped model name (census models); with --from, the config of the model "
                  "the file names, where Census ships none");
  sub->add_option("--from", a.from,
                  "TRAINER FILE: the run as a trainer's own config file states it: torchtitan (its TOML job config, "
                  "v0.1 or v0.2), torchtune (a full-finetune recipe config) or trl (a trl sft config); the flags beside it may only say "
                  "which step and machine (--world, --first-step, --stage, the overheads, the allocator's), the "
                  "sequence length where the file leaves it to the data (--seq-length), and how to show it")
      ->expected(2)
      ->type_name("TRAINER FILE");
  add_integer_option(*sub, kSeqLengthRule, a.seq_length, "tokens of each sequence (default 4096)");
  add_integer_option(*sub, kMicroBatchSizeRule, a.micro_batch_size, "sequences of each micro-batch (default 1)");
  add_integer_option(*sub, kMicroBatchesRule, a.micro_batches, "micro-batches accumulated per step (default 1)");
  add_integer_option(*sub, degree_rule("--pp"), a.pp, "pipeline stages (default 1)");
  add_integer_option(*sub, kStageRule, a.stage, "the pipeline stage to run (default: every stage)");
  add_choice_option(*sub, "--schedule", a.schedule, {"1f1b", "gpipe", "interleaved"},
                    "pipeline schedule: 1f1b (default), gpipe, or interleaved (with --virtual-stages)");
  add_integer_option(*sub, degree_rule("--virtual-stages"), a.virtual_stages,
                     "model chunks per stage, for --schedule interleaved (Megatron's order)");
  add_integer_option(*sub, stage_layers_rule("--first-stage-layers"), a.first_stage_layers,
                     "decoder layers of the first pipeline stage (Megatron's num_layers_in_first_pipeline_stage)");
  add_integer_option(*sub, stage_layers_rule("--last-stage-layers"), a.last_stage_layers,
                     "decoder layers of the last pipeline stage (num_layers_in_last_pipeline_stage)");
  sub->add_flag("--embedding-as-layer", a.embedding_as_layer,
                "count the embedding as a layer of the first stage (account_for_embedding_in_pipeline_split)");
  sub->add_flag("--loss-as-layer", a.loss_as_layer,
                "count the loss as a layer of the last stage (account_for_loss_in_pipeline_split)");
  add_text_option(*sub, "--recompute", a.recompute,
                  "activation checkpointing: none, selective (HyperParallel's policy), full (non-reentrant, the HF "
                  "Trainer's), full-reentrant, torchtitan-op (torchtitan's per-op policy) for every layer, or per "
                  "layer kind as 'none,moe=full' (census layers names the kinds); or torchtitan-layer:N (every N-th "
                  "layer whole)",
                  "give none, selective, full, full-reentrant, torchtitan-op, torchtitan-layer:N, or a mode per layer "
                  "kind ('none,moe=full')");
  add_choice_option(*sub, "--optimizer", a.optimizer, optimizer_names(),
                    "adamw (default), sgd (momentum 0.9), adafactor (torch.optim's), adamw8bit or paged-adamw8bit "
                    "(bitsandbytes'), torchao-adamw8bit or torchao-adamw4bit (torchao's), muon (torch.optim.Muon on "
                    "the 2-D weights, AdamW on the rest), or none: its step and zero_grad(set_to_none=True)");
  add_choice_option(*sub, "--optimizer-impl", a.optimizer_impl, {"foreach", "fused", "for-loop"},
                    "the optimizer's form as torch.optim runs it: foreach, fused or for-loop (foreach=False); left "
                    "out, PyTorch's default on CUDA (foreach; Adafactor's for-loop)");
  sub->add_flag("--optimizer-in-backward", a.optimizer_in_backward,
                "torchtune's optimizer_in_bwd: one optimizer a parameter, stepped and its gradient freed in the "
                "parameter's post-accumulate-grad hook, inside the backward (one micro-batch)");
  add_choice_option(*sub, "--loss", a.loss, nn::causal_lm_loss_names(),
                    "the loss from the last hidden state: hf (Transformers' ForCausalLMLoss on the whole logits, "
                    "the default; liger-flce under --liger), trl-chunked-nll (TRL's SFT default: no logits, checkpointed chunks of 256 "
                    "tokens, each with an fp32 copy of the head), liger-flce (Liger's fused linear cross-entropy: "
                    "no logits, both gradients made in the forward), torchtune-chunked (torchtune's "
                    "CEWithChunkedOutputLoss: the logits in 8 chunks, each upcast alone) or torchtune-linear "
                    "(torchtune's LinearCrossEntropyLoss: the head run in the loss on the tokens alone)");
  add_choice_option(*sub, "--offload-activations", a.offload_activations, {"trl", "torchtune"},
                    "activation offloading, as trl (SFTConfig.activation_offloading: around each micro-batch's "
                    "forward, loss and backward) or torchtune (its recipes': around the model's forward) runs it: "
                    "each saved tensor of 1 KiB or more copied to pinned host memory at pack and back at unpack, "
                    "the five newest kept, the LM head's saves kept; the host memory gets its own line");
  sub->add_flag("--liger", a.liger,
                "Liger's kernels as Transformers' Trainer and TRL apply them (use_liger_kernel): its RMSNorm, "
                "SwiGLU (GeGLU on Gemma) and rotary in the layers, and its fused linear cross-entropy unless --loss names another "
                "(llama, mistral, qwen2, qwen3, smollm3, gemma, gemma2, gemma3_text)");
  add_choice_option(*sub, "--fp8", a.fp8, {"tensorwise", "rowwise", "rowwise-gw-hp"},
                    "FP8 training, eager, as torchtitan converts the model with torchao: every nn.Linear whose "
                    "dimensions are multiples of 16 a Float8Linear of the recipe (tensorwise, rowwise, or "
                    "rowwise-gw-hp, torchao's rowwise_with_gw_hp); its casts' fp32 temporaries as eager mode "
                    "makes them (torch.compile fuses them away)");
  sub->add_flag("--fp8-skip-head", a.fp8_skip_head,
                "with --fp8: the LM head stays bf16, as torchtitan's filter_fqns=[\"output\"] leaves it (its Llama 3 "
                "405B config)");
  add_fine_tuning_options(*sub, a);
  sub->add_flag("--first-step", a.first_step,
                "price the first step, whose optimizer makes its states inside its step (default: the steady "
                "state, step 2 and later, with the states alive from the start)");
  add_integer_option(*sub, kTensorParallelRule, a.tp,
                     "tensor-parallel degree: the rank's layers as tp_config holds them (default 1)");
  add_integer_option(*sub, degree_rule("--dp"), a.dp, "data-parallel degree, for --zero (default 1)");
  add_integer_option(*sub, kZeroRule, a.zero,
                     "ZeRO stage: 0 (default), 1 (optimizer states / DP), 2 (and gradients), 3 (and parameters)");
  sub->add_flag("--fsdp", a.fsdp,
                "FSDP2 over --dp ranks, run on the rank: fully_shard per decoder layer and the root, its all-gathers, "
                "reduce-scatters and resharding as PyTorch runs them; with --master-weights fp32, fp32 shards under "
                "MixedPrecisionPolicy(bf16, fp32)");
  sub->add_flag("--cpu-offload", a.cpu_offload,
                "with --fsdp: FSDP2's CPUOffloadPolicy: the shards, their gradients and the optimizer's states on the "
                "host, each all-gather's shards copied to the device and each gradient back, the optimizer stepping "
                "on the host; the host memory gets its own line");
  sub->add_flag("--sequence-parallel", a.sequence_parallel,
                "with --tp: DTensor's plan as torchtitan applies it, SequenceParallel on the norms and the residual "
                "stream (S / T tokens a rank), the vocabulary-parallel embedding and head, collectives on the rank");
  sub->add_flag("--loss-parallel", a.loss_parallel,
                "with --tp: loss_parallel, the fp32 logits and the loss on the rank's V / T vocabulary shard");
  add_integer_option(*sub, kWorldRule, a.world, "ranks in all, if stated: --dp x --tp x --pp x --cp must equal it");
  add_choice_option(*sub, "--reshard-after-forward", a.reshard_after_forward, {"default", "true", "false"},
                    "FSDP2's reshard_after_forward: default (every layer but the last, and the root), true, false");
  add_choice_option(*sub, "--fsdp-wrap", a.fsdp_wrap, {"layers", "torchtitan"},
                    "FSDP2's units: layers (the default: fully_shard per decoder layer, then the root, torchtitan's until "
                    "v0.1) or torchtitan (v0.2's apply_fsdp: the embedding, each layer, the final norm with the head, "
                    "then the root; its reshard_after_forward default reshards every layer and the embedding, not the "
                    "norm and head)");
  add_integer_option(*sub, degree_rule("--cp"), a.cp,
                     "context-parallel degree: the rank's S / C tokens, plus the K/V its ring receives (default 1)");
  add_integer_option(*sub, degree_rule("--ep"), a.ep,
                     "expert-parallel degree: each MoE layer's num_experts / E experts on the rank (default 1)");
  add_integer_option(*sub, degree_rule("--expert-tp"), a.expert_tp,
                     "the experts' tensor-parallel degree: 1 keeps every rank's experts whole (Megatron's "
                     "expert_tensor_parallel_size); default --tp");
  add_choice_option(*sub, "--master-weights", a.master_weights, {"bf16", "fp32"},
                    "bf16 (default) or fp32 (fp32 master copy and moments)");
  add_choice_option(*sub, "--grad-dtype", a.grad_dtype, {"bf16", "fp32"},
                    "bf16 (default) or fp32 (Megatron's main_grad)");
  add_text_option(*sub, "--experts-implementation", a.experts_implementation, "grouped_mm (default) or eager",
                  "give grouped_mm or eager, or leave the option out");
  add_text_option(*sub, "--kernels", a.kernels, "the kernel profile: npu (the default, the reference's flash contract) or cuda",
                  "give npu or cuda, or leave the option out");
  add_text_option(*sub, "--train-yaml", a.train_yaml, "a HyperParallel train.yaml: its fused modules replace Transformers' own",
                  "give the path of a train.yaml, or leave the option out");
  add_bytes_option(*sub, "--cuda-context", a.cuda_context, "bytes of the CUDA context, added to the peak (default 0)");
  add_bytes_option(*sub, "--nccl-buffers", a.nccl_buffers, "bytes of NCCL's communicator buffers, added (default 0)");
  add_bytes_option(*sub, "--fragmentation", a.fragmentation, "bytes the allocator loses to fragmentation, added (default 0)");
  add_choice_option(*sub, "--format", a.format, {"table", "json"}, "table or json (default table)");
  sub->add_flag("--explain", a.explain, "each composed term's formula, and what the peak holds by op");
  add_allocator_options(sub, a);
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
  // The command line read these by their choice rule; Python's arguments meet the same one here
  // (--recompute's modes per layer kind are read where the step parses them, step/recompute_choice.h).
  CENSUS_TRY(parse_choice("--schedule", {"1f1b", "gpipe", "interleaved"}, a.schedule));
  CENSUS_TRY(parse_choice("--optimizer", optimizer_names(), a.optimizer));
  CENSUS_TRY(parse_choice("--loss", nn::causal_lm_loss_names(), loss_of(a)));
  if (!a.offload_activations.empty())
    CENSUS_TRY(parse_choice("--offload-activations", {"trl", "torchtune"}, a.offload_activations));
  if (!a.fp8.empty()) CENSUS_TRY(parse_choice("--fp8", {"tensorwise", "rowwise", "rowwise-gw-hp"}, a.fp8));
  CENSUS_TRY(check_fine_tuning_names(a));
  if (!a.optimizer_impl.empty()) {
    CENSUS_TRY(parse_choice("--optimizer-impl", {"foreach", "fused", "for-loop"}, a.optimizer_impl));
    if (a.optimizer == "none")
      return refuse("--optimizer-impl with --optimizer none", "there is no optimizer to run in a form; drop --optimizer-impl");
    CENSUS_TRY(check_optimizer(optimizer_of(a), optimizer_impl_of(a)));
  }
  if (a.first_step && a.optimizer == "none")
    return refuse("--first-step with --optimizer none",
                  "the first step differs from the later ones only by the optimizer states it makes, and there is "
                  "no optimizer; drop --first-step");
  CENSUS_TRY(parse_choice("--master-weights", {"bf16", "fp32"}, a.master_weights));
  CENSUS_TRY(parse_choice("--grad-dtype", {"bf16", "fp32"}, a.grad_dtype));
  if (a.recompute.empty())
    return refuse("--recompute", "is empty; give none, selective, full, full-reentrant, torchtitan-op, torchtitan-layer:N, "
                                 "or a mode per layer kind ('none,moe=full')");
  CENSUS_TRY(parse_choice("--reshard-after-forward", {"default", "true", "false"}, a.reshard_after_forward));
  if (!a.fsdp_wrap.empty()) {
    CENSUS_TRY(parse_choice("--fsdp-wrap", {"layers", "torchtitan"}, a.fsdp_wrap));
    if (!a.fsdp) return refuse("--fsdp-wrap", "names FSDP2's units; give --fsdp, or drop the option");
  }
  if (a.world != 0) CENSUS_TRY(check_integer(kWorldRule, a.world));
  if (a.fsdp && a.dp < 2) return refuse("--fsdp", "shards over the data-parallel ranks; give --dp N with N > 1");
  if (a.fsdp && a.zero > 0)
    return refuse("--fsdp with --zero " + std::to_string(a.zero),
                  "FSDP2 shards parameters, gradients and optimizer states itself; drop --zero or --fsdp");
  if ((a.sequence_parallel || a.loss_parallel) && a.tp < 2)
    return refuse(a.sequence_parallel ? "--sequence-parallel" : "--loss-parallel",
                  "shards over the tensor-parallel ranks; give --tp T with T > 1");
  if (a.world != 0) {
    const int64_t mesh = mesh_ranks(a);
    if (mesh != a.world)
      return refuse("--world " + std::to_string(a.world),
                    "the mesh --dp " + std::to_string(a.dp) + " x --tp " + std::to_string(a.tp) + " x --pp " +
                        std::to_string(a.pp) + " x --cp " + std::to_string(a.cp) + " is " +
                        (mesh < 0 ? "more than 2^20" : std::to_string(mesh)) +
                        " ranks; give degrees whose product is the world");
  }
  if (!a.fsdp && a.reshard_after_forward != "default")
    return refuse("--reshard-after-forward", "is FSDP2's; give --fsdp, or drop the option");
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
  request.micro_batch_size = a.micro_batch_size;
  request.tp = a.tp;
  request.experts_implementation = a.experts_implementation;
  request.kernels = a.kernels;
  request.liger = a.liger;
  request.train_yaml = a.train_yaml;
  CENSUS_TRY(check_request(request));
  // check_request holds --micro-batch-size to its rule, and B x S tokens to the config's counts.
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
  o.split = {a.first_stage_layers, a.last_stage_layers, a.embedding_as_layer, a.loss_as_layer};
  auto recompute = parse_recompute(request.config, a.recompute, "--recompute");
  CENSUS_TRY(recompute);
  o.recompute = recompute->all;
  o.recompute_by_kind = recompute->by_kind;
  o.recompute_every_nth_layer = recompute->every_nth_layer;
  o.optimizer = optimizer_of(a);
  o.optimizer_in_backward = a.optimizer_in_backward;
  o.optimizer_impl = optimizer_impl_of(a);
  o.first_step = a.first_step;
  if (a.offload_activations == "trl") o.offload_activations = OffloadPolicy::kTrl;
  if (a.offload_activations == "torchtune") o.offload_activations = OffloadPolicy::kTorchtune;
  if (!a.fp8.empty()) o.fp8 = nn::float8_recipe_named(a.fp8);
  o.fp8_skip_head = a.fp8_skip_head;
  set_fine_tuning(a, o);
  o.fsdp.cpu_offload = a.cpu_offload;
  o.loss = nn::causal_lm_loss_named(loss_of(a)).value_or(nn::CausalLMLoss::kForCausalLM);
  o.tensor_parallel = a.tp;
  o.sequence_parallel = a.sequence_parallel;
  o.loss_parallel = a.loss_parallel;
  o.context_parallel = a.cp;
  o.expert_parallel = a.ep;
  o.expert_tensor_parallel = a.expert_tp;
  o.composition.data_parallel = a.dp;
  o.composition.context_parallel = a.cp;
  o.composition.zero = static_cast<int>(a.zero);
  o.composition.fp32_master_weights = a.master_weights == "fp32" && !a.fsdp;
  if (a.fsdp) {
    o.fsdp.shards = a.dp;
    o.fsdp.wrap = a.fsdp_wrap == "torchtitan" ? FsdpWrap::kTorchtitan : FsdpWrap::kLayers;
    o.fsdp.mixed_precision = a.master_weights == "fp32";  // torchtitan: fp32 shards, bf16 compute, fp32 reduce
    o.fsdp.reshard_after_forward = a.reshard_after_forward == "true"    ? ReshardAfterForward::kAlways
                                   : a.reshard_after_forward == "false" ? ReshardAfterForward::kNever
                                                                        : ReshardAfterForward::kDefault;
  }
  o.composition.fp32_gradients = a.grad_dtype == "fp32";
  o.composition.cuda_context = a.cuda_context;
  o.composition.nccl_buffers = a.nccl_buffers;
  o.composition.fragmentation = a.fragmentation;
  CENSUS_ASSIGN(o.allocator, allocator_options(a));

  StepRuns result{request.config, o.composition, {}, 0};
  std::vector<int64_t> stages;  // --stage's, else every stage (checked first: --pp bounds the list)
  if (a.stage) stages.push_back(*a.stage);
  else CENSUS_TRY(check_step_options(result.config, o));
  for (int64_t r = 0; !a.stage && r < a.pp; ++r) stages.push_back(r);
  // The stages are independent steps, each in its own Session: they run on as many threads as there
  // are cores (a Session and its arena are the thread's own).
  std::vector<std::optional<Result<StepCensus>>> steps(stages.size());
  run_in_parallel(stages.size(), [&](size_t i) {
    StepOptions mine = o;
    mine.stage = stages[i];
    steps[i].emplace(census_step(result.config, mine));
  });
  for (size_t i = 0; i < stages.size(); ++i) {
    CENSUS_TRY(*steps[i]);
    result.runs.push_back({stages[i], steps[i]->take()});
  }
  for (const StageRun& run : result.runs)
    if ((Checked{reported_peak(run.step, o.composition).bytes} + overhead_bytes(o.composition)).overflows())
      return refuse("--cuda-context", "the step's peak and the overheads sum past 64-bit byte counts; give smaller overheads");
  for (size_t i = 0; i < result.runs.size(); ++i)
    if (total_of(result.runs[i].step, o.composition) > total_of(result.runs[result.worst].step, o.composition))
      result.worst = i;
  return result;
}

ordered_json runs_json(const StepRuns& r, const StepArgs& a) {
  if (r.runs.size() == 1) return stage_json(r.runs.front(), a, r.composition, r.config);
  ordered_json all = ordered_json::array();
  for (const StageRun& run : r.runs) all.push_back(stage_json(run, a, r.composition, r.config));
  return {{"stages", all}, {"worst_stage", r.runs[r.worst].stage},
          {"total_bytes", total_of(r.runs[r.worst].step, r.composition)}};
}

// The step's arguments with the run that --from's file states; `a` itself without --from. The flags given
// beside --from were checked as the command line parsed them (check_flags_beside_from): the model's config
// (where the file names a model Census does not ship), the GPU count, the sequence length the file leaves
// to the data, which step and the machine's overheads are taken from `a`.
struct FromFile {
  StepArgs args;
  std::optional<TrainerFile> file;
};

Result<FromFile> with_trainer_file(const StepArgs& a) {
  auto file = read_from(a.from, {a.world, !a.model.empty(), a.seq_length_given ? a.seq_length : 0});
  CENSUS_TRY(file);
  if (!*file) return FromFile{a, std::nullopt};
  FromFile out{a, file.take()};
  static_cast<Run&>(out.args) = out.file->run;
  if (!a.model.empty()) out.args.model = a.model;
  out.args.world = a.world;
  out.args.first_step = a.first_step;
  out.args.cuda_context = a.cuda_context;
  out.args.nccl_buffers = a.nccl_buffers;
  out.args.fragmentation = a.fragmentation;
  return out;
}

}  // namespace

Status check_flags_beside_from(const CLI::App& step, const StepArgs& a) {
  if (a.from.empty()) return {};
  return check_flags_beside_file(step, {"--from", "--world", "--seq-length", "--first-step", "--stage", "--format",
                                        "--explain", "--allocator", "--alloc-conf", "--gpu-memory", "--cuda-context",
                                        "--nccl-buffers", "--fragmentation", "config"});
}

Result<ordered_json> step_report_json(const StepArgs& a, const ModelConfig& config) {
  auto runs = run_step(a, config);
  CENSUS_TRY(runs);
  return runs_json(*runs, a);
}

int run_step_command(const StepArgs& given, std::ostream& out, std::ostream& err) {
  auto from = with_trainer_file(given);
  if (!from) return refuse_line(err, from.refusal().message());
  const StepArgs& a = from->args;
  if (a.model.empty())
    return refuse_line(err, "census step: give a config.json or a shipped model name (census models), or --from TRAINER FILE");
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
    ordered_json report = runs_json(r, a);
    if (from->file) report["from"] = trainer_file_json(given.from, *from->file, step_flags(a));
    answer << report.dump(2) << '\n';
    out << answer.str();
    return 0;
  }
  if (from->file) print_trainer_file(given.from, *from->file, step_command_line(a), answer);
  const ModelConfig& c = r.config;
  const PipelineSplit split{a.first_stage_layers, a.last_stage_layers, a.embedding_as_layer, a.loss_as_layer};
  answer << a.model << " (" << c.model_type << "): one rank's training step, " << a.seq_length << " tokens x "
         << (a.micro_batch_size > 1 ? std::to_string(a.micro_batch_size) + " sequences x " : "") << a.micro_batches
         << " micro-batch" << (a.micro_batches > 1 ? "es" : "") << ", PP " << a.pp << " ("
         << schedule_name(a) << (split.even() ? "" : ", " + split_name(split)) << "), TP " << a.tp << (a.cp > 1 ? ", CP " + std::to_string(a.cp) : "")
         << (a.ep > 1 ? ", EP " + std::to_string(a.ep) : "")
         << (a.expert_tp == 1 && a.tp > 1 ? ", experts' TP 1" : "") << ", recompute " << a.recompute << ", optimizer " << optimizer_label(a)
         << (a.liger ? ", Liger's kernels" : "") << (a.fp8.empty() ? "" : ", FP8 " + a.fp8 + (a.fp8_skip_head ? " (torchao, eager, the head bf16)" : " (torchao, eager)")) << (loss_of(a) != "hf" ? ", loss " + loss_of(a) : "") << (a.offload_activations.empty() ? "" : ", activations offloaded (" + a.offload_activations + ")")
         << (a.first_step ? ", the first step" : ", steady state (step 2 on)") << lora_label(a, c) << quantize_label(a)
         << (a.autocast.empty() ? "" : ", " + a.autocast + " autocast (HF Trainer, accelerate)");
  const bool data_parallel_terms =
      composition.zero > 0 || composition.fp32_master_weights || composition.fp32_gradients;
  if (data_parallel_terms)
    answer << ", DP " << a.dp << " ZeRO-" << a.zero << ", master weights " << a.master_weights << ", grads "
           << a.grad_dtype;
  if (a.fsdp)
    answer << ", FSDP2 over " << a.dp
           << (a.fsdp_wrap == "torchtitan" ? " (fully_shard of the embedding, each layer, the norm with the head, and the root, "
                                           : " (fully_shard per layer and root, ")
           << (a.master_weights == "fp32" ? "fp32 shards, MixedPrecisionPolicy(bf16, fp32)" : "bf16 shards, no policy")
           << ", reshard_after_forward " << a.reshard_after_forward << (a.cpu_offload ? ", CPUOffloadPolicy" : "") << ")";
  answer << (a.autocast.empty() || a.load_dtype == "bf16" ? ", bf16 parameters\n" : ", fp32 parameters\n");
  if (a.explain) {
    // The terms that shape what is simulated, by name.
    const ModelConfig rank = rank_config(c, a.tp, a.ep, a.expert_tp);
    answer << "tensor_parallel: the rank's layers as tp_config holds them at TP " << a.tp << ": attention heads "
           << c.num_attention_heads << " / " << a.tp << " = " << rank.num_attention_heads << ", KV heads "
           << c.num_key_value_heads << " -> " << rank.num_key_value_heads << ", intermediate " << c.intermediate_size
           << " / " << a.tp << " = " << rank.intermediate_size;
    if (c.moe.moe_intermediate_size > 0)
      answer << ", expert width " << c.moe.moe_intermediate_size << " / " << (a.expert_tp == 1 ? 1 : a.tp) << " = "
             << rank.moe.moe_intermediate_size
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
    answer << "pipeline: " << c.num_hidden_layers << " layers over " << a.pp << " stages ("
           << split_name({a.first_stage_layers, a.last_stage_layers, a.embedding_as_layer, a.loss_as_layer})
           << "); stage 0 holds the embedding, the last the final norm, head and loss\n";
    if (!a.autocast.empty())
      answer << "autocast: the model loaded in " << (a.load_dtype == "bf16" ? "bf16" : "fp32")
             << " (its parameters, gradients and optimizer states); its forward "
                "and loss under torch.autocast(\"cuda\", dtype=torch.bfloat16): the matrix products and the "
                "attention cast to bf16, a trainable weight once a forward (the cast cache, freed as the forward "
                "ends), an activation or a frozen weight at every use; pow, rsqrt, exp, softplus, sum, softmax and "
                "the loss in fp32; then accelerate's fp32 copy of the logits, alive until the loss is taken\n";
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
                   layers_cell(run.step), grouped(m.bytes),
                   m.phase, grouped(m.split.parameters()), grouped(m.split.gradients()),
                   grouped(m.split.optimizer_states()), grouped(m.split.other()),
                   grouped(total_of(run.step, composition))});
    }
    summary.print(answer);
    if (a.allocator) {
      std::vector<std::pair<int64_t, const StepAllocatorCensus*>> stages;
      for (const StageRun& run : runs) stages.emplace_back(run.stage, &*run.step.allocator);
      print_allocator_stages(stages, answer);
    }
    answer << "\nthe stage that needs the most:\n";
  }
  print_stage(runs[worst], a, composition, answer);
  out << answer.str();
  return 0;
}

}  // namespace census::cli
