#include "run/torchtitan_toml.h"

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <string_view>
#include <vector>

#include "run/toml_subset.h"
#include "util/escape.h"

namespace census {
namespace {

// What a field's value must be, as torchtitan's dataclasses type it.
enum class Type : uint8_t { kString, kInteger, kNumber, kBool, kStrings, kStringOrStrings, kStringLists };

struct JobField {
  std::string_view path;  // section.name, as the TOML file nests it
  Type type;
  FieldUse use;
};

// The fields of torchtitan's JobConfig at v0.1 and v0.2 (the union: a field renamed keeps both names).
constexpr JobField kFields[] = {
    {"job.config_file", Type::kString, FieldUse::kNoMemory},
    {"job.dump_folder", Type::kString, FieldUse::kNoMemory},
    {"job.description", Type::kString, FieldUse::kNoMemory},
    {"job.print_config", Type::kBool, FieldUse::kNoMemory},
    {"job.print_args", Type::kBool, FieldUse::kNoMemory},
    {"job.use_for_integration_test", Type::kBool, FieldUse::kNoMemory},
    {"job.custom_config_module", Type::kString, FieldUse::kRead},
    {"profiling.enable_profiling", Type::kBool, FieldUse::kNoMemory},
    {"profiling.save_traces_folder", Type::kString, FieldUse::kNoMemory},
    {"profiling.profile_freq", Type::kInteger, FieldUse::kNoMemory},
    {"profiling.profiler_active", Type::kInteger, FieldUse::kNoMemory},
    {"profiling.profiler_warmup", Type::kInteger, FieldUse::kNoMemory},
    {"profiling.enable_memory_snapshot", Type::kBool, FieldUse::kNoMemory},
    {"profiling.save_memory_snapshot_folder", Type::kString, FieldUse::kNoMemory},
    {"metrics.log_freq", Type::kInteger, FieldUse::kNoMemory},
    {"metrics.enable_tensorboard", Type::kBool, FieldUse::kNoMemory},
    {"metrics.disable_color_printing", Type::kBool, FieldUse::kNoMemory},
    {"metrics.save_tb_folder", Type::kString, FieldUse::kNoMemory},
    {"metrics.save_for_all_ranks", Type::kBool, FieldUse::kNoMemory},
    {"metrics.enable_wandb", Type::kBool, FieldUse::kNoMemory},
    {"model.name", Type::kString, FieldUse::kRead},
    {"model.flavor", Type::kString, FieldUse::kRead},
    {"model.hf_assets_path", Type::kString, FieldUse::kNoMemory},
    {"model.tokenizer_path", Type::kString, FieldUse::kNoMemory},
    {"model.converters", Type::kStrings, FieldUse::kRead},
    {"model.print_after_conversion", Type::kBool, FieldUse::kNoMemory},
    {"optimizer.name", Type::kString, FieldUse::kRead},
    {"optimizer.lr", Type::kNumber, FieldUse::kNoMemory},
    {"optimizer.beta1", Type::kNumber, FieldUse::kNoMemory},
    {"optimizer.beta2", Type::kNumber, FieldUse::kNoMemory},
    {"optimizer.eps", Type::kNumber, FieldUse::kNoMemory},
    {"optimizer.weight_decay", Type::kNumber, FieldUse::kNoMemory},
    {"optimizer.implementation", Type::kString, FieldUse::kRead},
    {"optimizer.early_step_in_backward", Type::kBool, FieldUse::kRead},
    {"lr_scheduler.warmup_steps", Type::kInteger, FieldUse::kNoMemory},
    {"lr_scheduler.decay_ratio", Type::kNumber, FieldUse::kNoMemory},
    {"lr_scheduler.decay_type", Type::kString, FieldUse::kNoMemory},
    {"lr_scheduler.min_lr_factor", Type::kNumber, FieldUse::kNoMemory},
    {"lr_scheduler.lr_min", Type::kNumber, FieldUse::kNoMemory},
    {"training.dataset", Type::kString, FieldUse::kNoMemory},
    {"training.dataset_path", Type::kString, FieldUse::kNoMemory},
    {"training.local_batch_size", Type::kInteger, FieldUse::kRead},
    {"training.global_batch_size", Type::kInteger, FieldUse::kRead},
    {"training.seq_len", Type::kInteger, FieldUse::kRead},
    {"training.max_norm", Type::kNumber, FieldUse::kClip},
    {"training.steps", Type::kInteger, FieldUse::kNoMemory},
    {"training.enable_cpu_offload", Type::kBool, FieldUse::kRead},
    {"training.dtype", Type::kString, FieldUse::kRead},
    {"training.mixed_precision_param", Type::kString, FieldUse::kRead},
    {"training.mixed_precision_reduce", Type::kString, FieldUse::kRead},
    {"training.compile", Type::kBool, FieldUse::kRead},
    {"training.gc_freq", Type::kInteger, FieldUse::kNoMemory},
    {"training.gc_debug", Type::kBool, FieldUse::kNoMemory},
    {"training.seed", Type::kInteger, FieldUse::kNoMemory},
    {"training.deterministic", Type::kBool, FieldUse::kNoMemory},
    {"training.debug_moe_force_load_balance", Type::kBool, FieldUse::kNoMemory},
    {"parallelism.data_parallel_replicate_degree", Type::kInteger, FieldUse::kRead},
    {"parallelism.enable_compiled_autograd", Type::kBool, FieldUse::kRead},
    {"parallelism.data_parallel_shard_degree", Type::kInteger, FieldUse::kRead},
    {"parallelism.fsdp_reshard_after_forward", Type::kString, FieldUse::kRead},
    {"parallelism.tensor_parallel_degree", Type::kInteger, FieldUse::kRead},
    {"parallelism.disable_loss_parallel", Type::kBool, FieldUse::kRead},
    {"parallelism.enable_async_tensor_parallel", Type::kBool, FieldUse::kRead},
    {"parallelism.pipeline_parallel_degree", Type::kInteger, FieldUse::kRead},
    {"parallelism.module_fqns_per_model_part", Type::kStringLists, FieldUse::kUnused},
    {"parallelism.pipeline_parallel_split_points", Type::kStrings, FieldUse::kUnused},
    {"parallelism.pipeline_parallel_first_stage_less_layers", Type::kInteger, FieldUse::kUnused},
    {"parallelism.pipeline_parallel_last_stage_less_layers", Type::kInteger, FieldUse::kUnused},
    {"parallelism.pipeline_parallel_layers_per_stage", Type::kInteger, FieldUse::kUnused},
    {"parallelism.pipeline_parallel_schedule", Type::kString, FieldUse::kUnused},
    {"parallelism.pipeline_parallel_schedule_csv", Type::kString, FieldUse::kUnused},
    {"parallelism.pipeline_parallel_microbatch_size", Type::kInteger, FieldUse::kUnused},
    {"parallelism.context_parallel_degree", Type::kInteger, FieldUse::kRead},
    {"parallelism.context_parallel_rotate_method", Type::kString, FieldUse::kUnused},
    {"parallelism.expert_parallel_degree", Type::kInteger, FieldUse::kRead},
    {"parallelism.expert_tensor_parallel_degree", Type::kInteger, FieldUse::kUnused},
    {"checkpoint.enable", Type::kBool, FieldUse::kBetweenSteps},
    {"checkpoint.enable_checkpoint", Type::kBool, FieldUse::kBetweenSteps},
    {"checkpoint.enable_ft_dataloader_checkpoints", Type::kBool, FieldUse::kBetweenSteps},
    {"checkpoint.folder", Type::kString, FieldUse::kBetweenSteps},
    {"checkpoint.interval", Type::kInteger, FieldUse::kBetweenSteps},
    {"checkpoint.initial_load_path", Type::kString, FieldUse::kBetweenSteps},
    {"checkpoint.initial_load_model_only", Type::kBool, FieldUse::kBetweenSteps},
    {"checkpoint.initial_load_model_weights_only", Type::kBool, FieldUse::kBetweenSteps},
    {"checkpoint.initial_load_in_hf", Type::kBool, FieldUse::kBetweenSteps},
    {"checkpoint.initial_load_in_hf_quantized", Type::kBool, FieldUse::kBetweenSteps},
    {"checkpoint.last_save_model_only", Type::kBool, FieldUse::kBetweenSteps},
    {"checkpoint.last_save_model_weights_only", Type::kBool, FieldUse::kBetweenSteps},
    {"checkpoint.last_save_in_hf", Type::kBool, FieldUse::kBetweenSteps},
    {"checkpoint.export_dtype", Type::kString, FieldUse::kBetweenSteps},
    {"checkpoint.async_mode", Type::kString, FieldUse::kBetweenSteps},
    {"checkpoint.keep_latest_k", Type::kInteger, FieldUse::kBetweenSteps},
    {"checkpoint.load_step", Type::kInteger, FieldUse::kBetweenSteps},
    {"checkpoint.exclude_from_loading", Type::kStrings, FieldUse::kBetweenSteps},
    {"checkpoint.enable_first_step_checkpoint", Type::kBool, FieldUse::kBetweenSteps},
    {"checkpoint.create_seed_checkpoint", Type::kBool, FieldUse::kBetweenSteps},
    {"checkpoint.load_only", Type::kBool, FieldUse::kBetweenSteps},
    {"activation_checkpoint.mode", Type::kString, FieldUse::kRead},
    {"activation_checkpoint.selective_ac_option", Type::kString, FieldUse::kRead},
    {"activation_checkpoint.per_op_sac_force_recompute_mm_shapes_by_fqns", Type::kStrings, FieldUse::kRead},
    {"activation_checkpoint.early_stop", Type::kBool, FieldUse::kRead},
    {"activation_checkpoint.memory_budget", Type::kNumber, FieldUse::kUnused},
    {"activation_checkpoint.visualize_memory_budget_pareto", Type::kBool, FieldUse::kUnused},
    {"compile.enable", Type::kBool, FieldUse::kRead},
    {"compile.components", Type::kStrings, FieldUse::kUnused},
    {"compile.backend", Type::kString, FieldUse::kUnused},
    // torchao's Float8Linear: [float8] at v0.1, [quantize.linear.float8] at v0.2.
    {"float8.enable_fsdp_float8_all_gather", Type::kBool, FieldUse::kRead},
    {"float8.precompute_float8_dynamic_scale_for_fsdp", Type::kBool, FieldUse::kRead},
    {"float8.force_recompute_fp8_weight_in_bwd", Type::kBool, FieldUse::kRead},
    {"float8.recipe_name", Type::kString, FieldUse::kRead},
    {"float8.filter_fqns", Type::kStrings, FieldUse::kRead},
    {"float8.emulate", Type::kBool, FieldUse::kRead},
    {"quantize.linear.float8.enable_fsdp_float8_all_gather", Type::kBool, FieldUse::kRead},
    {"quantize.linear.float8.precompute_float8_dynamic_scale_for_fsdp", Type::kBool, FieldUse::kRead},
    {"quantize.linear.float8.recipe_name", Type::kString, FieldUse::kRead},
    {"quantize.linear.float8.filter_fqns", Type::kStrings, FieldUse::kRead},
    {"quantize.linear.float8.emulate", Type::kBool, FieldUse::kRead},
    {"quantize.grouped_mm.float8.fqns", Type::kStringOrStrings, FieldUse::kUnused},
    {"quantize.linear.mx.mxfp8_dim1_cast_kernel_choice", Type::kString, FieldUse::kUnused},
    {"quantize.linear.mx.recipe_name", Type::kString, FieldUse::kUnused},
    {"quantize.linear.mx.filter_fqns", Type::kStrings, FieldUse::kUnused},
    {"quantize.grouped_mm.mx.recipe_name", Type::kString, FieldUse::kUnused},
    {"quantize.grouped_mm.mx.fqns", Type::kStringOrStrings, FieldUse::kUnused},
    {"mx.use_fp8_dim1_cast_triton_kernel", Type::kBool, FieldUse::kUnused},
    {"mx.recipe_name", Type::kString, FieldUse::kUnused},
    {"mx.filter_fqns", Type::kStrings, FieldUse::kUnused},
    {"comm.init_timeout_seconds", Type::kInteger, FieldUse::kNoMemory},
    {"comm.train_timeout_seconds", Type::kInteger, FieldUse::kNoMemory},
    {"comm.trace_buf_size", Type::kInteger, FieldUse::kNoMemory},
    {"comm.save_traces_folder", Type::kString, FieldUse::kNoMemory},
    {"comm.save_traces_file_prefix", Type::kString, FieldUse::kNoMemory},
    {"memory_estimation.enable", Type::kBool, FieldUse::kNoMemory},
    {"memory_estimation.enabled", Type::kBool, FieldUse::kNoMemory},
    {"memory_estimation.disable_fake_mode", Type::kBool, FieldUse::kNoMemory},
    {"fault_tolerance.enable", Type::kBool, FieldUse::kRead},
    {"fault_tolerance.process_group", Type::kString, FieldUse::kUnused},
    {"fault_tolerance.process_group_timeout_ms", Type::kInteger, FieldUse::kUnused},
    {"fault_tolerance.replica_id", Type::kInteger, FieldUse::kUnused},
    {"fault_tolerance.group_size", Type::kInteger, FieldUse::kUnused},
    {"fault_tolerance.min_replica_size", Type::kInteger, FieldUse::kUnused},
    {"fault_tolerance.semi_sync_method", Type::kString, FieldUse::kUnused},
    {"fault_tolerance.sync_steps", Type::kInteger, FieldUse::kUnused},
    {"fault_tolerance.should_quantize", Type::kBool, FieldUse::kUnused},
    {"fault_tolerance.fragment_sync_delay", Type::kInteger, FieldUse::kUnused},
    {"fault_tolerance.fragment_update_alpha", Type::kNumber, FieldUse::kUnused},
    {"experimental.custom_import", Type::kString, FieldUse::kRead},
    {"experimental.custom_args_module", Type::kString, FieldUse::kRead},
    {"validation.enable", Type::kBool, FieldUse::kRead},
    {"validation.dataset", Type::kString, FieldUse::kUnused},
    {"validation.dataset_path", Type::kString, FieldUse::kUnused},
    {"validation.local_batch_size", Type::kInteger, FieldUse::kUnused},
    {"validation.seq_len", Type::kInteger, FieldUse::kUnused},
    {"validation.freq", Type::kInteger, FieldUse::kUnused},
    {"validation.steps", Type::kInteger, FieldUse::kUnused},
};

// Fields only v0.1 has: a file with one of them is read as v0.1 (FSDP2's units as it applied them).
constexpr std::string_view kVersion01Only[] = {"training.compile", "checkpoint.enable_checkpoint",
                                               "checkpoint.last_save_model_weights_only",
                                               "checkpoint.initial_load_model_weights_only"};

const JobField* field_named(std::string_view path) {
  for (const JobField& f : kFields)
    if (f.path == path) return &f;
  return nullptr;
}

bool is_section(std::string_view path) {
  for (const JobField& f : kFields)
    if (f.path.size() > path.size() && f.path.starts_with(path) && f.path[path.size()] == '.') return true;
  return false;
}

const char* type_name(Type type) {
  switch (type) {
    case Type::kString: return "a string";
    case Type::kInteger: return "an integer";
    case Type::kNumber: return "a number";
    case Type::kBool: return "true or false";
    case Type::kStrings: return "a list of strings";
    case Type::kStringOrStrings: return "a string or a list of strings";
    case Type::kStringLists: return "a list of lists of strings";
  }
  return "";
}

bool strings(const TomlValue& value) {
  return value.is_array() &&
         std::all_of(value.array().begin(), value.array().end(), [](const TomlValue& v) { return v.is_string(); });
}

bool has_type(const TomlValue& value, Type type) {
  switch (type) {
    case Type::kString: return value.is_string();
    case Type::kInteger: return value.is_integer();
    case Type::kNumber: return value.is_integer() || value.is_float();
    case Type::kBool: return value.is_bool();
    case Type::kStrings: return strings(value);
    case Type::kStringOrStrings: return value.is_string() || strings(value);
    case Type::kStringLists:
      return value.is_array() &&
             std::all_of(value.array().begin(), value.array().end(), [](const TomlValue& v) { return strings(v); });
  }
  return false;
}

// The job file's fields by path, each checked against torchtitan's sections, names and types.
class JobFile {
 public:
  explicit JobFile(const std::string& path) : path_(path) {}

  Status read(const TomlDocument& doc) {
    for (const TomlTable& table : doc.tables)
      if (!is_section(table.path))
        return refuse(path_ + ": [" + escaped(table.path.substr(0, kShownLength)) + "]",
                      "is not a section of torchtitan's job config (v0.1, v0.2); remove it, or give the file torchtitan reads");
    for (const TomlEntry& entry : doc.entries) {
      const std::string& path = entry.path;
      if (is_section(path)) return refuse(field_name(path), "is a section of torchtitan's job config, not a value");
      const JobField* field = field_named(path);
      const size_t dot = path.rfind('.');
      const std::string prefix = dot == std::string::npos ? std::string() : path.substr(0, dot);
      if (field == nullptr)
        return refuse(field_name(path), prefix.empty() || !is_section(prefix)
                                            ? std::string("is not a field of torchtitan's job config (v0.1, v0.2); remove it")
                                            : "is not a field of torchtitan's [" + prefix + "]; remove it");
      if (!has_type(entry.value, field->type))
        return refuse(field_name(path), std::string("must be ") + type_name(field->type) + ", as torchtitan types it");
      order_.push_back(field);
      values_[field->path] = &entry.value;
    }
    return {};
  }

  // A field as a refusal names it: one of torchtitan's as it is, any other as the file spells it, escaped.
  std::string field_name(std::string_view path) const {
    return path_ + ": " + (field_named(path) != nullptr || is_section(path) ? std::string(path) : echoed(path));
  }
  bool has(std::string_view path) const { return values_.contains(path); }
  const std::vector<const JobField*>& order() const { return order_; }

  std::string text(std::string_view path, std::string_view left_out) const {
    const auto found = values_.find(path);
    return found == values_.end() ? std::string(left_out) : found->second->string();
  }
  int64_t integer(std::string_view path, int64_t left_out) const {
    const auto found = values_.find(path);
    return found == values_.end() ? left_out : found->second->integer();
  }
  bool flag(std::string_view path) const {
    const auto found = values_.find(path);
    return found != values_.end() && found->second->boolean();
  }
  std::vector<std::string> list(std::string_view path) const {
    std::vector<std::string> out;
    const auto found = values_.find(path);
    if (found == values_.end()) return out;
    if (found->second->is_array())
      for (const TomlValue& item : found->second->array()) out.push_back(item.string());
    else
      out.push_back(found->second->string());
    return out;
  }

 private:
  std::string path_;
  std::map<std::string_view, const TomlValue*> values_;
  std::vector<const JobField*> order_;
};

// torchtitan's model name and flavor to a shipped config of the same architecture (Transformers' names).
struct ShippedFlavor {
  std::string_view name;
  std::string_view flavor;
  std::string_view model;
};
constexpr ShippedFlavor kShippedFlavors[] = {
    {"llama3", "8B", "llama-3.1-8b"},
    {"llama3", "70B", "llama-3.1-70b"},
    {"qwen3", "8B", "qwen3-8b"},
    {"qwen3", "32B", "qwen3-32b"},
};

// A degree of [parallelism]: 1 or more (the shard degree may be -1).
Result<int64_t> degree(const JobFile& job, std::string_view name, bool launcher_may_set = false) {
  const std::string path = "parallelism." + std::string(name);
  const int64_t value = job.integer(path, launcher_may_set ? -1 : 1);
  if ((value >= 1 && value <= kLargestDegree) || (launcher_may_set && value == -1)) return value;
  return refuse(job.field_name(path), std::to_string(value) + " is not a degree Census prices; give 1 to 2^20" +
                                          (launcher_may_set ? std::string(", or -1 for the GPUs left") : std::string()));
}

Refusal not_priced(const JobFile& job, std::string_view path, const std::string& why) {
  return refuse(job.field_name(path), why);
}

}  // namespace

Result<TrainerFile> read_torchtitan_toml(const std::string& text, const std::string& path,
                                         const TrainerFileContext& context) {
  auto doc = parse_toml_subset(text, path);
  CENSUS_TRY(doc);
  JobFile job(path);
  CENSUS_TRY(job.read(*doc));
  const bool version01 = std::any_of(std::begin(kVersion01Only), std::end(kVersion01Only),
                                     [&](std::string_view f) { return job.has(f); }) ||
                         job.has("float8.recipe_name") || job.has("float8.filter_fqns") || job.has("float8.emulate");

  TrainerFile out;
  out.format = std::string("torchtitan's TOML job config, ") + (version01 ? "v0.1" : "v0.2");
  Run& run = out.run;
  run.kernels = "cuda";  // torchtitan trains on CUDA GPUs: their flash attention's contract, not the NPU's

  // Code the file would import, and trainers' modes Census does not price.
  for (const char* custom : {"job.custom_config_module", "experimental.custom_import", "experimental.custom_args_module"})
    if (!job.text(custom, "").empty())
      return not_priced(job, custom, "imports the run's own code, which Census cannot read; remove it, or give the run as flags");
  if (job.flag("compile.enable") || job.flag("training.compile"))
    return not_priced(job, job.has("compile.enable") ? "compile.enable" : "training.compile",
                      "torch.compile fuses ops that Census prices as eager mode runs them; set it to false to price "
                      "the eager run");
  if (job.flag("fault_tolerance.enable"))
    return not_priced(job, "fault_tolerance.enable", "torchft's replicas and their copies are not priced; set it to false");
  if (job.flag("validation.enable"))
    return not_priced(job, "validation.enable",
                      "the validation pass's memory is not priced; set it to false to price the training step");
  if (job.flag("parallelism.enable_compiled_autograd"))
    return not_priced(job, "parallelism.enable_compiled_autograd", "compiled autograd is not priced; set it to false");
  if (job.flag("parallelism.enable_async_tensor_parallel"))
    return not_priced(job, "parallelism.enable_async_tensor_parallel",
                      "async TP runs under torch.compile, which Census does not price; set it to false");

  // The model.
  const std::string name = job.text("model.name", "llama3");
  const std::string flavor = job.text("model.flavor", "debugmodel");
  if (!context.model_given) {
    const auto shipped = std::find_if(std::begin(kShippedFlavors), std::end(kShippedFlavors),
                                      [&](const ShippedFlavor& s) { return s.name == name && s.flavor == flavor; });
    if (shipped == std::end(kShippedFlavors))
      return refuse(job.field_name("model.flavor"),
                    "torchtitan's model " + echoed(name) + ", flavor " + echoed(flavor) +
                        ", has no shipped config (llama3 8B, 70B; qwen3 8B, 32B); give its config.json as the step's "
                        "CONFIG argument");
    run.model = std::string(shipped->model);
  }

  // The data.
  if (context.seq_length != 0)
    return refuse("--seq-length beside --from", "the job file states the sequence length (training.seq_len, 2,048 "
                                                "where it is silent); change the file, or drop --seq-length");
  run.seq_length = job.integer("training.seq_len", 2048);
  run.micro_batch_size = job.integer("training.local_batch_size", 8);
  if (run.seq_length < 1 || run.seq_length > kLargestSeqLength)
    return not_priced(job, "training.seq_len", std::to_string(run.seq_length) + " tokens: give 1 to 2^32");
  if (run.micro_batch_size < 1 || run.micro_batch_size > kLargestMicroBatchSize)
    return not_priced(job, "training.local_batch_size",
                      std::to_string(run.micro_batch_size) + " sequences: give 1 to 2^16, the most a micro-batch holds");

  // The parallel layout: torchtitan's ParallelDims.
  CENSUS_ASSIGN(const int64_t replicate, degree(job, "data_parallel_replicate_degree"));
  CENSUS_ASSIGN(int64_t shard, degree(job, "data_parallel_shard_degree", true));
  CENSUS_ASSIGN(run.tp, degree(job, "tensor_parallel_degree"));
  CENSUS_ASSIGN(const int64_t pp, degree(job, "pipeline_parallel_degree"));
  CENSUS_ASSIGN(const int64_t cp, degree(job, "context_parallel_degree"));
  CENSUS_ASSIGN(const int64_t ep, degree(job, "expert_parallel_degree"));
  if (replicate > 1)
    return not_priced(job, "parallelism.data_parallel_replicate_degree",
                      "replication (DDP, or HSDP beside sharding) is not priced; give 1");
  if (pp > 1)
    return not_priced(job, "parallelism.pipeline_parallel_degree",
                      "torchtitan's pipeline stages (their split and schedule) are not read yet; give 1, or the run "
                      "as flags (--pp)");
  if (cp > 1)
    return not_priced(job, "parallelism.context_parallel_degree",
                      "context_parallel's rotation of K and V is not priced as torchtitan runs it; give 1");
  if (ep > 1)
    return not_priced(job, "parallelism.expert_parallel_degree",
                      "torchtitan's all-to-all expert dispatch is not priced; give 1");
  if (shard == -1) {
    if (context.world == 0)
      return refuse(job.field_name("parallelism.data_parallel_shard_degree"),
                    "-1 takes the GPUs the other degrees leave; give the GPU count with " + std::string(context.world_flag) + " N");
    if (context.world % run.tp != 0)
      return refuse(std::string(context.world_flag) + " " + std::to_string(context.world),
                    "is not a multiple of parallelism.tensor_parallel_degree " + std::to_string(run.tp) +
                        "; give a GPU count that is");
    shard = context.world / run.tp;
  }
  run.world = context.world;
  run.dp = shard;
  run.fsdp = shard > 1;
  if (run.tp > 1) {
    run.sequence_parallel = true;  // torchtitan's TP plan: SequenceParallel on the norms
    run.loss_parallel = !job.flag("parallelism.disable_loss_parallel");
  }

  // The steps's micro-batches: global_batch_size over the data-parallel ranks' local batches.
  const int64_t global = job.integer("training.global_batch_size", -1);
  if (global != -1) {
    const int64_t per_step = run.micro_batch_size * shard;
    // per_step is at most 2^16 x 2^20 sequences.
    if (global < 1 || global % per_step != 0)
      return refuse(job.field_name("training.global_batch_size"),
                    std::to_string(global) + " is not a multiple of local_batch_size x the data-parallel degree (" +
                        std::to_string(per_step) + "); give one, or -1");
    run.micro_batches = global / per_step;
    if (run.micro_batches > kLargestMicroBatches)
      return refuse(job.field_name("training.global_batch_size"),
                    std::to_string(run.micro_batches) + " micro-batches a rank are more than a step accumulates (at "
                                                         "most 2^12); give a smaller global batch");
  }

  // The precision: torchtitan's model is made in training.dtype; FSDP2 casts it to mixed_precision_param.
  const std::string dtype = job.text("training.dtype", "float32");
  const std::string param = job.text("training.mixed_precision_param", "bfloat16");
  const std::string reduce = job.text("training.mixed_precision_reduce", "float32");
  if (dtype != "float32" && dtype != "bfloat16")
    return not_priced(job, "training.dtype", echoed(dtype) + " is not torchtitan's; give float32 or bfloat16");
  if (param != "bfloat16")
    return not_priced(job, "training.mixed_precision_param",
                      echoed(param) + ": only bf16 compute is priced; give bfloat16");
  if (reduce != "float32")
    return not_priced(job, "training.mixed_precision_reduce", echoed(reduce) + " is not torchtitan's; give float32");
  if (run.fsdp) {
    if (dtype != "float32")
      return not_priced(job, "training.dtype",
                        "bf16 shards reduced in fp32 (MixedPrecisionPolicy(bf16, fp32) over a bf16 model) are not "
                        "priced; give float32");
    run.master_weights = "fp32";
  } else if (dtype != "bfloat16") {
    return not_priced(job, "training.dtype",
                      std::string("without FSDP torchtitan trains the float32 model ") +
                          (run.tp > 1 ? "in fp32" : "under autocast") +
                          ", which Census does not price; give bfloat16, or shard over more GPUs");
  }
  const std::string reshard = job.text("parallelism.fsdp_reshard_after_forward", "default");
  if (reshard != "default" && reshard != "always" && reshard != "never")
    return not_priced(job, "parallelism.fsdp_reshard_after_forward",
                      echoed(reshard) + " is not torchtitan's; give default, always or never");
  run.cpu_offload = run.fsdp && job.flag("training.enable_cpu_offload");
  // FSDP2's units: v0.1 wraps each block, then the root (Census's default units, whose default reshards every
  // block but the last); v0.2 the embedding, each block, the final norm with the head, then the root, which
  // Census runs as torchtitan's units alone: beside TP or CPU offloading it keeps its default units, every
  // block resharded.
  bool v02_units = false;
  if (run.fsdp) {
    v02_units = !version01 && run.tp == 1 && !run.cpu_offload;
    if (v02_units) run.fsdp_wrap = "torchtitan";
    if (reshard == "never") run.reshard_after_forward = "false";
    else if (reshard == "always" || (!version01 && !v02_units)) run.reshard_after_forward = "true";
  }

  // Activation checkpointing (torchtitan's apply_ac).
  const std::string mode = job.text("activation_checkpoint.mode", "selective");
  const std::string option = job.text("activation_checkpoint.selective_ac_option", "2");
  if (job.flag("activation_checkpoint.early_stop"))
    return not_priced(job, "activation_checkpoint.early_stop", "the recompute's early stop is not priced; set it to false");
  if (mode == "none") {
    run.recompute = "none";
  } else if (mode == "full") {
    run.recompute = "full";
  } else if (mode == "selective") {
    if (option == "op") {
      run.recompute = "torchtitan-op";
      const std::vector<std::string> forced = job.list("activation_checkpoint.per_op_sac_force_recompute_mm_shapes_by_fqns");
      if (job.has("activation_checkpoint.per_op_sac_force_recompute_mm_shapes_by_fqns") &&
          forced != std::vector<std::string>{"moe.router.gate"})
        return not_priced(job, "activation_checkpoint.per_op_sac_force_recompute_mm_shapes_by_fqns",
                          "only torchtitan's default ([\"moe.router.gate\"]) is priced; remove the field");
    } else if (!option.empty() && option.size() <= 7 && option.find_first_not_of("0123456789") == std::string::npos &&
               std::stoll(option) >= 1) {
      run.recompute = "torchtitan-layer:" + std::to_string(std::stoll(option));
    } else {
      return not_priced(job, "activation_checkpoint.selective_ac_option",
                        echoed(option) + " is not torchtitan's; give \"op\" or a positive whole number of layers");
    }
  } else if (mode == "memory_budget") {
    return not_priced(job, "activation_checkpoint.mode",
                      "memory_budget is the compiler's min-cut, which Census does not price; give none, selective or full");
  } else {
    return not_priced(job, "activation_checkpoint.mode", echoed(mode) + " is not torchtitan's; give none, selective or full");
  }

  // The optimizer.
  const std::string optimizer = job.text("optimizer.name", "AdamW");
  if (optimizer != "AdamW")
    return not_priced(job, "optimizer.name", echoed(optimizer) + " is not priced as torchtitan builds it; give AdamW");
  const std::string implementation = job.text("optimizer.implementation", "fused");
  if (implementation != "fused" && implementation != "foreach" && implementation != "for-loop")
    return not_priced(job, "optimizer.implementation",
                      echoed(implementation) + " is not torchtitan's; give fused, foreach or for-loop");
  run.optimizer_impl = implementation;
  run.optimizer_in_backward = job.flag("optimizer.early_step_in_backward");

  // The model converters: torchao's Float8Linear, and no other.
  bool float8 = false;
  for (const std::string& converter : job.list("model.converters")) {
    if (converter == "float8" || converter == "quantize.linear.float8") {
      float8 = true;
      continue;
    }
    return not_priced(job, "model.converters",
                      echoed(converter) + " is not priced; Census prices torchao's Float8Linear (float8, "
                                          "quantize.linear.float8) alone");
  }
  const std::string f8 = job.has("quantize.linear.float8.recipe_name") || !version01 ? "quantize.linear.float8." : "float8.";
  if (float8) {
    for (const std::string flag : {"enable_fsdp_float8_all_gather", "force_recompute_fp8_weight_in_bwd", "emulate"})
      for (const std::string section : {"float8.", "quantize.linear.float8."})
        if (job.flag(section + flag))
          return not_priced(job, section + flag, "is not priced with Float8Linear; set it to false");
    const std::string recipe = job.text(f8 + "recipe_name", "tensorwise");
    if (recipe == "tensorwise" || recipe == "rowwise") run.fp8 = recipe;
    else if (recipe == "rowwise_with_gw_hp") run.fp8 = "rowwise-gw-hp";
    else
      return not_priced(job, f8 + "recipe_name",
                        echoed(recipe) + " is not torchao's; give tensorwise, rowwise or rowwise_with_gw_hp");
    const std::vector<std::string> filtered = job.list(f8 + "filter_fqns");
    if (!filtered.empty() && filtered != std::vector<std::string>{"output"})
      return not_priced(job, f8 + "filter_fqns",
                        "only [\"output\"] (the LM head left bf16) is priced; give it, or an empty list");
    run.fp8_skip_head = !filtered.empty();
    if (run.tp > 1)
      return not_priced(job, "parallelism.tensor_parallel_degree",
                        "Float8Linear under tensor parallelism is not priced; give 1, or drop the float8 converter");
  }

  out.notes.emplace_back("Census re-runs Transformers' modeling of the architecture, not torchtitan's model code "
                         "(its rotary embedding in complex fp32, for one)");
  if (run.fsdp && !version01 && !v02_units)
    out.notes.emplace_back(std::string("torchtitan v0.2 shards the embedding, and the final norm with the head, as "
                                       "FSDP2 units of their own; beside ") +
                           (run.tp > 1 ? "TP" : "CPU offloading") +
                           " Census prices its default units, whose root holds the three (its embedding gathered "
                           "again for the backward, where torchtitan's waits until the embedding's own)");
  // Everything else read is ignored, each with its reason; the float8 section without its converter too.
  for (const JobField* f : job.order()) {
    FieldUse use = f->use;
    const bool float8_field = f->path.starts_with("float8.") || f->path.starts_with("quantize.linear.float8.");
    if (use == FieldUse::kRead && float8_field && !float8) use = FieldUse::kUnused;
    if (use == FieldUse::kRead && (f->path == "training.enable_cpu_offload" || f->path == "parallelism.fsdp_reshard_after_forward") &&
        !run.fsdp)
      use = FieldUse::kUnused;
    if (use == FieldUse::kRead && f->path == "parallelism.disable_loss_parallel" && run.tp == 1) use = FieldUse::kUnused;
    if (use != FieldUse::kRead) out.ignored.push_back({std::string(f->path), why_ignored(use)});
  }
  return out;
}

}  // namespace census
