#include "run/trl_yaml.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <string_view>
#include <vector>

#include "run/yaml_fields.h"
#include "run/yaml_text.h"
#include "util/escape.h"

namespace census {
namespace {

// Every field `trl sft --config` reads (TrlParser: the dataclasses' fields side by side, and `env`), and what
// it does to the step. kRead fields are read below; a field read as "refused when set" is listed as unused where
// the file leaves it at its default.
struct TrlField {
  std::string_view name;
  FieldUse use;
};
constexpr TrlField kTrlFields[] = {
    // TrlParser's own
    {"env", FieldUse::kRead},
    // ScriptArguments and DatasetMixtureConfig: the data, read on the host
    {"dataset_name", FieldUse::kNoMemory}, {"dataset_config", FieldUse::kNoMemory},
    {"dataset_train_split", FieldUse::kNoMemory}, {"dataset_test_split", FieldUse::kNoMemory},
    {"dataset_streaming", FieldUse::kNoMemory}, {"ignore_bias_buffers", FieldUse::kNoMemory},
    {"datasets", FieldUse::kNoMemory}, {"streaming", FieldUse::kNoMemory}, {"test_split_size", FieldUse::kNoMemory},
    // ModelConfig
    {"model_name_or_path", FieldUse::kRead}, {"model_revision", FieldUse::kNoMemory}, {"dtype", FieldUse::kRead},
    {"attn_implementation", FieldUse::kRead}, {"use_peft", FieldUse::kRead}, {"lora_r", FieldUse::kRead},
    {"lora_alpha", FieldUse::kRead}, {"lora_dropout", FieldUse::kRead}, {"lora_target_modules", FieldUse::kRead},
    {"lora_target_parameters", FieldUse::kRead}, {"lora_modules_to_save", FieldUse::kRead},
    {"lora_task_type", FieldUse::kRead}, {"use_rslora", FieldUse::kNoMemory}, {"use_dora", FieldUse::kRead},
    {"load_in_8bit", FieldUse::kRead}, {"load_in_4bit", FieldUse::kRead}, {"bnb_4bit_quant_type", FieldUse::kRead},
    {"use_bnb_nested_quant", FieldUse::kRead}, {"bnb_4bit_quant_storage", FieldUse::kRead},
    // SFTConfig
    {"model_init_kwargs", FieldUse::kUnused},  // `trl sft` replaces it with ModelConfig's (scripts/sft.py)
    {"router_aux_loss_coef", FieldUse::kUnused},  // only where the config asks output_router_logits, refused
    {"trust_remote_code", FieldUse::kRead}, {"chat_template_path", FieldUse::kNoMemory},
    {"dataset_text_field", FieldUse::kNoMemory}, {"dataset_kwargs", FieldUse::kNoMemory},
    {"dataset_num_proc", FieldUse::kNoMemory}, {"eos_token", FieldUse::kNoMemory}, {"pad_token", FieldUse::kNoMemory},
    {"max_length", FieldUse::kRead}, {"truncation_mode", FieldUse::kNoMemory}, {"shuffle_dataset", FieldUse::kNoMemory},
    {"packing", FieldUse::kRead}, {"packing_strategy", FieldUse::kRead}, {"padding_free", FieldUse::kRead},
    {"pad_to_multiple_of", FieldUse::kRead}, {"eval_packing", FieldUse::kBetweenSteps},
    {"completion_only_loss", FieldUse::kNoMemory}, {"assistant_only_loss", FieldUse::kNoMemory},
    {"loss_type", FieldUse::kRead}, {"activation_offloading", FieldUse::kRead},
    // TrainingArguments (Transformers 5), with TRL's defaults where _BaseConfig changes them
    {"output_dir", FieldUse::kNoMemory}, {"per_device_train_batch_size", FieldUse::kRead},
    {"num_train_epochs", FieldUse::kNoMemory}, {"max_steps", FieldUse::kNoMemory},
    {"learning_rate", FieldUse::kNoMemory}, {"lr_scheduler_type", FieldUse::kNoMemory},
    {"lr_scheduler_kwargs", FieldUse::kNoMemory}, {"warmup_steps", FieldUse::kNoMemory}, {"optim", FieldUse::kRead},
    {"optim_args", FieldUse::kRead}, {"weight_decay", FieldUse::kNoMemory}, {"adam_beta1", FieldUse::kNoMemory},
    {"adam_beta2", FieldUse::kNoMemory}, {"adam_epsilon", FieldUse::kNoMemory}, {"optim_target_modules", FieldUse::kRead},
    {"gradient_accumulation_steps", FieldUse::kRead}, {"average_tokens_across_devices", FieldUse::kNoMemory},
    {"max_grad_norm", FieldUse::kRead}, {"label_smoothing_factor", FieldUse::kRead}, {"bf16", FieldUse::kRead},
    {"fp16", FieldUse::kRead}, {"bf16_full_eval", FieldUse::kBetweenSteps}, {"fp16_full_eval", FieldUse::kBetweenSteps},
    {"tf32", FieldUse::kNoMemory}, {"gradient_checkpointing", FieldUse::kRead},
    {"gradient_checkpointing_kwargs", FieldUse::kRead}, {"torch_compile", FieldUse::kRead},
    {"torch_compile_backend", FieldUse::kRead}, {"torch_compile_mode", FieldUse::kRead},
    {"use_liger_kernel", FieldUse::kRead}, {"liger_kernel_config", FieldUse::kRead}, {"use_cache", FieldUse::kRead},
    {"neftune_noise_alpha", FieldUse::kRead}, {"torch_empty_cache_steps", FieldUse::kBetweenSteps},
    {"auto_find_batch_size", FieldUse::kRead}, {"logging_strategy", FieldUse::kNoMemory},
    {"logging_steps", FieldUse::kNoMemory}, {"logging_first_step", FieldUse::kNoMemory},
    {"log_on_each_node", FieldUse::kNoMemory}, {"logging_nan_inf_filter", FieldUse::kNoMemory},
    {"include_num_input_tokens_seen", FieldUse::kNoMemory}, {"log_level", FieldUse::kNoMemory},
    {"log_level_replica", FieldUse::kNoMemory}, {"disable_tqdm", FieldUse::kNoMemory}, {"report_to", FieldUse::kNoMemory},
    {"run_name", FieldUse::kNoMemory}, {"project", FieldUse::kNoMemory}, {"trackio_space_id", FieldUse::kNoMemory},
    {"trackio_bucket_id", FieldUse::kNoMemory}, {"trackio_static_space_id", FieldUse::kNoMemory},
    {"eval_strategy", FieldUse::kBetweenSteps}, {"eval_steps", FieldUse::kBetweenSteps},
    {"eval_delay", FieldUse::kBetweenSteps}, {"per_device_eval_batch_size", FieldUse::kBetweenSteps},
    {"prediction_loss_only", FieldUse::kBetweenSteps}, {"eval_on_start", FieldUse::kBetweenSteps},
    {"eval_do_concat_batches", FieldUse::kBetweenSteps}, {"eval_use_gather_object", FieldUse::kBetweenSteps},
    {"eval_accumulation_steps", FieldUse::kBetweenSteps}, {"include_for_metrics", FieldUse::kBetweenSteps},
    {"batch_eval_metrics", FieldUse::kBetweenSteps}, {"save_only_model", FieldUse::kBetweenSteps},
    {"save_strategy", FieldUse::kBetweenSteps}, {"save_steps", FieldUse::kBetweenSteps},
    {"save_on_each_node", FieldUse::kBetweenSteps}, {"save_total_limit", FieldUse::kBetweenSteps},
    {"enable_jit_checkpoint", FieldUse::kBetweenSteps}, {"push_to_hub", FieldUse::kBetweenSteps},
    {"hub_token", FieldUse::kBetweenSteps}, {"hub_private_repo", FieldUse::kBetweenSteps},
    {"hub_model_id", FieldUse::kBetweenSteps}, {"hub_strategy", FieldUse::kBetweenSteps},
    {"hub_always_push", FieldUse::kBetweenSteps}, {"hub_revision", FieldUse::kBetweenSteps},
    {"load_best_model_at_end", FieldUse::kBetweenSteps}, {"metric_for_best_model", FieldUse::kBetweenSteps},
    {"greater_is_better", FieldUse::kBetweenSteps}, {"ignore_data_skip", FieldUse::kNoMemory},
    {"restore_callback_states_from_checkpoint", FieldUse::kNoMemory}, {"full_determinism", FieldUse::kNoMemory},
    {"seed", FieldUse::kNoMemory}, {"data_seed", FieldUse::kNoMemory}, {"use_cpu", FieldUse::kRead},
    {"accelerator_config", FieldUse::kUnused}, {"parallelism_config", FieldUse::kRead},
    {"dataloader_drop_last", FieldUse::kNoMemory}, {"dataloader_num_workers", FieldUse::kNoMemory},
    {"dataloader_pin_memory", FieldUse::kNoMemory}, {"dataloader_persistent_workers", FieldUse::kNoMemory},
    {"dataloader_prefetch_factor", FieldUse::kNoMemory}, {"dataloader_multiprocessing_context", FieldUse::kNoMemory},
    {"dataloader_in_order", FieldUse::kNoMemory}, {"remove_unused_columns", FieldUse::kNoMemory},
    {"label_names", FieldUse::kNoMemory}, {"train_sampling_strategy", FieldUse::kNoMemory},
    {"length_column_name", FieldUse::kNoMemory}, {"ddp_find_unused_parameters", FieldUse::kUnused},
    {"ddp_bucket_cap_mb", FieldUse::kUnused}, {"ddp_broadcast_buffers", FieldUse::kUnused},
    {"ddp_static_graph", FieldUse::kUnused}, {"ddp_backend", FieldUse::kUnused}, {"ddp_timeout", FieldUse::kUnused},
    {"fsdp", FieldUse::kRead}, {"fsdp_config", FieldUse::kRead}, {"deepspeed", FieldUse::kRead},
    {"debug", FieldUse::kNoMemory}, {"skip_memory_metrics", FieldUse::kNoMemory}, {"do_train", FieldUse::kNoMemory},
    {"do_eval", FieldUse::kNoMemory}, {"do_predict", FieldUse::kNoMemory},
    {"resume_from_checkpoint", FieldUse::kBetweenSteps}, {"local_rank", FieldUse::kNoMemory},
};

// Fields that change what runs in a way Census does not price: refused where the file sets them (to anything
// but their default), with what to do.
struct RefusedWhenSet {
  std::string_view name;
  std::string_view why;
};
constexpr RefusedWhenSet kRefusedWhenSet[] = {
    {"torch_compile", "torch.compile fuses ops that Census prices as eager mode runs them; set it to false"},
    {"torch_compile_backend", "implies torch_compile, which Census does not price; remove it"},
    {"torch_compile_mode", "implies torch_compile, which Census does not price; remove it"},
    {"fsdp", "the Trainer's FSDP is not read from a TRL file yet; give the run as census step flags (--fsdp --dp N)"},
    {"fsdp_config", "the Trainer's FSDP is not read from a TRL file yet; give the run as census step flags"},
    {"deepspeed", "DeepSpeed's config is not read yet; give the run as census step flags (--zero N --dp N)"},
    {"parallelism_config", "accelerate's parallelism config is not read yet; give the run as census step flags"},
    {"use_cpu", "Census prices a CUDA GPU's step; remove it"},
    {"optim_args", "changes the optimizer's construction, which is not priced; remove it"},
    {"optim_target_modules", "GaLore's and APOLLO's projected optimizers are not priced; remove it"},
    {"label_smoothing_factor", "the Trainer's label smoother computes the loss outside the model, which is not "
                               "priced; remove it"},
    {"liger_kernel_config", "a chosen set of Liger's kernels is not priced (use_liger_kernel alone is); remove it"},
    {"use_cache", "a KV cache kept through training is not priced; set it to false"},
    {"neftune_noise_alpha", "NEFTune's noise on the embeddings is not priced; remove it"},
    {"auto_find_batch_size", "the batch size it settles on is found by running out of memory; give "
                             "per_device_train_batch_size instead"},
    {"trust_remote_code", "a model's own code may differ from Transformers' modeling, which Census re-runs; set it "
                          "to false"},
    {"packing", "packed batches run padding-free, one row of every sequence, which is not priced yet; set it to "
                "false"},
    {"padding_free", "padding-free batches (one row of every sequence) are not priced yet; set it to false"},
    {"lora_target_parameters", "LoRA on fused experts' parameters is not priced yet; remove it"},
    {"load_in_8bit", "bitsandbytes' 8-bit base is not priced; use load_in_4bit, or remove it"},
};

// The hub's names of the models Census ships a config of (its name, lower case).
struct HubModel {
  std::string_view hub_id;  // lower case
  std::string_view model;
};
constexpr HubModel kHubModels[] = {
    {"meta-llama/llama-3.1-8b", "llama-3.1-8b"}, {"meta-llama/llama-3.1-8b-instruct", "llama-3.1-8b"},
    {"meta-llama/meta-llama-3.1-8b", "llama-3.1-8b"}, {"meta-llama/meta-llama-3.1-8b-instruct", "llama-3.1-8b"},
    {"meta-llama/llama-3.1-70b", "llama-3.1-70b"}, {"meta-llama/llama-3.1-70b-instruct", "llama-3.1-70b"},
    {"qwen/qwen3-8b", "qwen3-8b"}, {"qwen/qwen3-8b-base", "qwen3-8b"}, {"qwen/qwen3-32b", "qwen3-32b"},
    {"qwen/qwen3-30b-a3b", "qwen3-30b-a3b"}, {"qwen/qwen3-30b-a3b-base", "qwen3-30b-a3b"},
    {"qwen/qwen2.5-7b", "qwen2.5-7b"}, {"qwen/qwen2.5-7b-instruct", "qwen2.5-7b"},
    {"qwen/qwen3-next-80b-a3b-instruct", "qwen3-next-80b-a3b"}, {"qwen/qwen3-next-80b-a3b-thinking", "qwen3-next-80b-a3b"},
    {"mistralai/mistral-7b-v0.3", "mistral-7b-v0.3"}, {"mistralai/mistral-7b-instruct-v0.3", "mistral-7b-v0.3"},
    {"mistralai/mixtral-8x7b-v0.1", "mixtral-8x7b"}, {"mistralai/mixtral-8x7b-instruct-v0.1", "mixtral-8x7b"},
    {"google/gemma-3-27b-pt", "gemma-3-27b"}, {"google/gemma-3-27b-it", "gemma-3-27b"},
    {"google/gemma-2-9b", "gemma-2-9b"}, {"google/gemma-2-9b-it", "gemma-2-9b"},
    {"google/gemma-2-27b", "gemma-2-27b"}, {"google/gemma-2-27b-it", "gemma-2-27b"},
    {"huggingfacetb/smollm3-3b", "smollm3-3b"}, {"huggingfacetb/smollm3-3b-base", "smollm3-3b"},
    {"microsoft/phi-4", "phi-4"}, {"allenai/olmo-3.1-32b-instruct", "olmo-3.1-32b-instruct"},
};

// Transformers 5's TrainingArguments.optim names Census prices, as the Trainer builds each
// (get_optimizer_cls_and_kwargs): torch's AdamW (its CUDA default, foreach) or fused; bitsandbytes' AdamW with
// optim_bits 8, paged or not; torchao's AdamW8bit and AdamW4bit; torch's SGD.
struct TrainerOptimizer {
  std::string_view optim;
  std::string_view optimizer;
  std::string_view impl;
};
constexpr TrainerOptimizer kTrainerOptimizers[] = {
    {"adamw_torch", "adamw", "foreach"},        {"adamw_torch_fused", "adamw", "fused"},
    {"adamw_bnb_8bit", "adamw8bit", ""},        {"adamw_8bit", "adamw8bit", ""},
    {"paged_adamw_8bit", "paged-adamw8bit", ""}, {"adamw_torch_8bit", "torchao-adamw8bit", ""},
    {"adamw_torch_4bit", "torchao-adamw4bit", ""}, {"sgd", "sgd", "foreach"},
};

std::string lowercase_of(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The config's fields, and whether one is set to anything but its default.
class TrlConfig : public YamlFields {
 public:
  using YamlFields::YamlFields;

  // Given, and not false, 0, an empty text or an empty list.
  bool set(const std::string& key) const {
    const YAML::Node node = at(key);
    if (!node.IsDefined() || node.IsNull()) return false;
    if (node.IsSequence() || node.IsMap()) return node.size() > 0;
    const std::string text = lowercase_of(node.Scalar());
    return !(text.empty() || text == "false" || text == "0" || text == "0.0" || text == "none" || text == "null");
  }
};

// A positive count, at most `most`; `left_out` where the file leaves it out.
Result<int64_t> trl_count(const TrlConfig& config, const std::string& key, int64_t left_out, int64_t most, const char* what) {
  CENSUS_ASSIGN(const std::optional<int64_t> value, config.integer(key));
  if (!value) return left_out;
  if (*value < 1 || *value > most)
    return config.refused(key, std::to_string(*value) + " " + what + ": give 1 to " + std::to_string(most));
  return *value;
}

// Module names, a list or one text (PEFT's target_modules and modules_to_save), comma-joined; empty where the
// file leaves the field out. `or_else`: what else the field takes, said where it is no list of names.
Result<std::string> module_names(const TrlConfig& config, const std::string& key, const std::string& or_else) {
  const YAML::Node node = config.at(key);
  if (!node.IsDefined() || node.IsNull()) return std::string();
  std::string names;
  if (node.IsScalar()) {
    names = node.Scalar();
  } else if (node.IsSequence()) {
    for (const YAML::Node& name : node) {
      if (!name.IsScalar()) return config.refused(key, "must be module names" + or_else);
      names += (names.empty() ? "" : ",") + name.Scalar();
    }
  } else {
    return config.refused(key, "must be module names" + or_else);
  }
  if (names.empty()) return config.refused(key, "is empty; name modules" + or_else);
  return names;
}

Result<TrainerFile> read_sft_config(const YAML::Node& root, const std::string& path, const TrainerFileContext& context) {
  if (!root.IsMap()) return refuse(path, "is not a mapping of trl sft's fields; give a TRL config (YAML)");
  const TrlConfig config(path, root);
  TrainerFile out;
  out.format = "TRL's trl sft config (YAML), f2cd577, with Transformers 5's TrainingArguments";
  Run& run = out.run;

  std::vector<std::string> keys;
  for (const auto& entry : root) {
    if (!entry.first.IsScalar()) return refuse(path, "has a key that is not a name; give a TRL config");
    const std::string key = entry.first.Scalar();
    const auto known = std::find_if(std::begin(kTrlFields), std::end(kTrlFields), [&](const TrlField& f) { return f.name == key; });
    if (known == std::end(kTrlFields))
      return refuse(path + ": " + echoed(key), "is not a field trl sft reads; remove it, or give the run as flags");
    keys.push_back(key);
  }
  for (const RefusedWhenSet& r : kRefusedWhenSet)
    if (config.set(std::string(r.name))) return config.refused(r.name, std::string(r.why));
  // TrlParser sets `env`'s variables before the run: the allocator's and the collectives' change memory.
  const YAML::Node env = config.at("env");
  if (env.IsDefined() && !env.IsNull()) {
    if (!env.IsMap()) return config.refused("env", "must be a mapping of environment variables");
    for (const auto& entry : env) {
      const std::string name = entry.first.IsScalar() ? entry.first.Scalar() : std::string();
      if (name.rfind("PYTORCH_", 0) == 0 || name.rfind("NCCL_", 0) == 0 || name.rfind("TORCH_", 0) == 0)
        return config.refused("env." + escaped(name.substr(0, kShownLength)),
                              "may change the step's memory, which a TRL file is not read for yet; remove it (census "
                              "step --alloc-conf takes PYTORCH_CUDA_ALLOC_CONF)");
    }
  }
  if (context.world > 1)
    return refuse(std::string(context.world_flag) + " " + std::to_string(context.world) + " with --from trl",
                  "the Trainer's data parallelism (DDP, or accelerate's FSDP) is not read from a TRL file yet; give "
                  "the run as census step flags");
  run.world = context.world;
  run.kernels = "cuda";  // Transformers' sdpa and flash-attention kernels on CUDA

  // The model.
  CENSUS_ASSIGN(const std::string model, config.text("model_name_or_path"));
  if (!context.model_given) {
    if (model.empty())
      return config.refused("model_name_or_path", "is missing; name the model, or give its config.json as the "
                                                  "step's CONFIG argument");
    const std::string id = lowercase_of(model);
    const auto shipped = std::find_if(std::begin(kHubModels), std::end(kHubModels),
                                      [&](const HubModel& m) { return m.hub_id == id; });
    if (shipped == std::end(kHubModels))
      return config.refused("model_name_or_path", echoed(model) + " has no shipped config; give its config.json as "
                                                                  "the step's CONFIG argument");
    run.model = std::string(shipped->model);
  }
  CENSUS_ASSIGN(const std::string attention, config.text("attn_implementation"));
  if (!attention.empty() && attention != "sdpa" && attention != "flash_attention_2" && attention != "flash_attention_3" &&
      attention != "kernels-community/flash-attn" && attention != "kernels-community/flash-attn3")
    return config.refused("attn_implementation", echoed(attention) + " is not priced; Census prices a flash kernel's "
                                                                     "contract (sdpa, flash_attention_2): give one, "
                                                                     "or remove it");

  // The precision: the load dtype (ModelConfig.dtype, float32 by default) and the Trainer's autocast.
  CENSUS_ASSIGN(const bool fp16, config.flag("fp16", false));
  if (fp16) return config.refused("fp16", "fp16 mixed precision is not priced (Census has no fp16 dtype); use bf16");
  CENSUS_ASSIGN(const bool bf16, config.flag("bf16", true));  // TRL's _BaseConfig: True unless fp16
  CENSUS_ASSIGN(std::string dtype, config.text("dtype"));
  if (dtype.empty()) dtype = "float32";
  if (dtype != "float32" && dtype != "bfloat16" && dtype != "auto")
    return config.refused("dtype", echoed(dtype) + " is not priced; give float32, bfloat16 or auto");
  const bool load_fp32 = dtype == "float32";
  if (dtype == "auto")
    out.notes.emplace_back("dtype auto loads the checkpoint's dtype: Census prices bf16, which the shipped checkpoints "
                           "are");
  if (bf16) run.autocast = "bf16";
  if (bf16 && !load_fp32) run.load_dtype = "bf16";
  if (!bf16 && load_fp32)
    return config.refused("bf16", "false with dtype float32 trains in fp32 throughout, which is not priced yet; set "
                                  "bf16 true (the Trainer's autocast), or dtype bfloat16");

  // The data: the sequence length a batch reaches.
  CENSUS_ASSIGN(const std::optional<int64_t> max_length_given, config.integer("max_length"));
  const bool max_length_null = config.at("max_length").IsDefined() && config.at("max_length").IsNull();
  std::optional<int64_t> max_length = max_length_null ? std::nullopt : std::optional<int64_t>(max_length_given.value_or(1024));
  if (max_length) {
    if (*max_length < 1 || *max_length > kLargestSeqLength)
      return config.refused("max_length", std::to_string(*max_length) + " tokens: give 1 to 2^32");
    if (context.seq_length != 0)
      return refuse("--seq-length beside --from", "the file states the sequence length (max_length, 1024 where left "
                                                  "out); change the file, or drop --seq-length");
    CENSUS_ASSIGN(const std::optional<int64_t> multiple, config.integer("pad_to_multiple_of"));
    if (multiple && (*multiple < 1 || *multiple > kLargestSeqLength))
      return config.refused("pad_to_multiple_of", std::to_string(*multiple) + ": give 1 to 2^32");
    run.seq_length = multiple ? (*max_length + *multiple - 1) / *multiple * *multiple : *max_length;
    if (run.seq_length > kLargestSeqLength)
      return config.refused("pad_to_multiple_of", "rounds max_length past 2^32 tokens; give a smaller one");
    out.notes.emplace_back("TRL pads each batch to its longest sequence: Census prices every batch at max_length" +
                           std::string(multiple ? " rounded up to pad_to_multiple_of" : "") + ", the longest it can be");
  } else {
    if (context.seq_length == 0)
      return config.refused("max_length", "is null: each batch is as long as its longest sequence; give the length to "
                                          "price with --seq-length N");
    run.seq_length = context.seq_length;
  }
  CENSUS_ASSIGN(run.micro_batch_size, trl_count(config, "per_device_train_batch_size", 8, kLargestMicroBatchSize, "sequences"));
  CENSUS_ASSIGN(run.micro_batches, trl_count(config, "gradient_accumulation_steps", 1, kLargestMicroBatches, "micro-batches"));

  // Checkpointing (TRL: on), and TRL's activation offloading.
  CENSUS_ASSIGN(const bool checkpointing, config.flag("gradient_checkpointing", true));
  run.recompute = "none";
  if (checkpointing) {
    run.recompute = "full";  // gradient_checkpointing_enable(None): use_reentrant=False
    const YAML::Node kwargs = config.at("gradient_checkpointing_kwargs");
    if (kwargs.IsDefined() && !kwargs.IsNull()) {
      if (!kwargs.IsMap()) return config.refused("gradient_checkpointing_kwargs", "must be a mapping (use_reentrant)");
      for (const auto& entry : kwargs)
        if (!entry.first.IsScalar() || entry.first.Scalar() != "use_reentrant")
          return config.refused("gradient_checkpointing_kwargs",
                                "may only name use_reentrant; other arguments of torch.utils.checkpoint are not priced");
      // A mapping without use_reentrant: torch.utils.checkpoint's own default, reentrant.
      bool reentrant = true;
      if (kwargs["use_reentrant"].IsDefined() &&
          (!kwargs["use_reentrant"].IsScalar() || !YAML::convert<bool>::decode(kwargs["use_reentrant"], reentrant)))
        return config.refused("gradient_checkpointing_kwargs.use_reentrant", "must be true or false");
      if (reentrant) run.recompute = "full-reentrant";
    }
  }
  CENSUS_ASSIGN(const bool offloading, config.flag("activation_offloading", false));
  if (offloading) run.offload_activations = "trl";

  // The optimizer.
  CENSUS_ASSIGN(std::string optim, config.text("optim"));
  if (optim.empty()) optim = "adamw_torch_fused";  // Transformers 5's default on torch >= 2.8
  const auto priced = std::find_if(std::begin(kTrainerOptimizers), std::end(kTrainerOptimizers),
                                   [&](const TrainerOptimizer& o) { return o.optim == optim; });
  if (priced == std::end(kTrainerOptimizers))
    return config.refused("optim", echoed(optim) + " is not priced; give adamw_torch, adamw_torch_fused, adamw_bnb_8bit, "
                                                   "paged_adamw_8bit, adamw_torch_8bit, adamw_torch_4bit or sgd");
  run.optimizer = std::string(priced->optimizer);
  run.optimizer_impl = std::string(priced->impl);
  if (run.optimizer_impl == "foreach")
    out.notes.emplace_back("the Trainer's two parameter groups (weight decay on the weights, none on biases and norms) "
                           "each run their own foreach update; Census runs one group, whose update holds every "
                           "parameter's temporaries at once");

  // The loss: TRL's chunked cross-entropy unless Liger's kernels replace it.
  CENSUS_ASSIGN(const bool liger, config.flag("use_liger_kernel", false));
  run.liger = liger;
  CENSUS_ASSIGN(std::string loss, config.text("loss_type"));
  if (loss.empty()) loss = liger ? "nll" : "chunked_nll";
  if (loss == "chunked_nll") {
    if (liger) return config.refused("loss_type", "chunked_nll cannot run with use_liger_kernel (TRL refuses it); give nll");
    run.loss = "trl-chunked-nll";
  } else if (loss == "nll") {
    run.loss = liger ? "liger-flce" : "hf";
  } else {
    return config.refused("loss_type", echoed(loss) + " is not priced; give nll or chunked_nll");
  }

  // The adapters, as get_peft_config builds them (TRL's defaults: r 16, alpha 32, dropout 0.05).
  CENSUS_ASSIGN(const bool peft, config.flag("use_peft", false));
  CENSUS_ASSIGN(const bool four_bit, config.flag("load_in_4bit", false));
  if (peft) {
    run.lora = true;
    CENSUS_ASSIGN(const std::optional<int64_t> r, config.integer("lora_r"));
    run.lora_rank = r.value_or(16);
    CENSUS_ASSIGN(const std::optional<double> alpha, config.number("lora_alpha"));
    run.lora_alpha = alpha.value_or(32);
    CENSUS_ASSIGN(const std::optional<double> dropout, config.number("lora_dropout"));
    run.lora_dropout = dropout.value_or(0.05);
    CENSUS_ASSIGN(run.lora_targets, module_names(config, "lora_target_modules", ", or all-linear"));
    // get_peft_config: LoraConfig(modules_to_save=lora_modules_to_save)
    CENSUS_ASSIGN(run.modules_to_save, module_names(config, "lora_modules_to_save", ""));
    CENSUS_ASSIGN(const std::string task, config.text("lora_task_type"));
    if (!task.empty() && task != "CAUSAL_LM")
      return config.refused("lora_task_type", echoed(task) + ": census prices a causal LM's training; give CAUSAL_LM");
    CENSUS_ASSIGN(run.use_dora, config.flag("use_dora", false));
  }
  if (four_bit) {
    CENSUS_ASSIGN(const std::string quant_type, config.text("bnb_4bit_quant_type"));
    run.quantize = quant_type.empty() ? "nf4" : quant_type;
    if (run.quantize != "nf4" && run.quantize != "fp4")
      return config.refused("bnb_4bit_quant_type", echoed(run.quantize) + ": give nf4 or fp4");
    CENSUS_ASSIGN(run.double_quant, config.flag("use_bnb_nested_quant", false));
    CENSUS_ASSIGN(const std::string storage, config.text("bnb_4bit_quant_storage"));
    if (!storage.empty()) {
      if (storage != "uint8" && storage != "bfloat16" && storage != "float32")
        return config.refused("bnb_4bit_quant_storage", echoed(storage) + ": give uint8, bfloat16 or float32");
      run.quant_storage = storage == "bfloat16" ? "bf16" : storage == "float32" ? "fp32" : "uint8";
    }
    run.compute_dtype = load_fp32 ? "fp32" : "bf16";  // get_quantization_config: bnb_4bit_compute_dtype=dtype
  }

  out.notes.emplace_back("Census prices every label as a token; TRL's chunked loss skips masked ones "
                         "(completion_only_loss, assistant_only_loss, padding), so its loss holds at most this");
  if (!config.given("max_grad_norm"))
    out.notes.emplace_back("max_grad_norm, 1.0 where left out: the gradient clip's fp32 norms, a few hundred bytes a "
                           "tensor, are not priced");
  for (const std::string& key : keys) {
    const auto known = std::find_if(std::begin(kTrlFields), std::end(kTrlFields), [&](const TrlField& f) { return f.name == key; });
    FieldUse use = known->use;
    if (use == FieldUse::kRead) {
      const bool peft_field = key.rfind("lora_", 0) == 0 || key == "use_dora";
      const bool quant_field = key.rfind("bnb_4bit_", 0) == 0 || key == "use_bnb_nested_quant";
      const bool refused_when_set = std::any_of(std::begin(kRefusedWhenSet), std::end(kRefusedWhenSet),
                                                [&](const RefusedWhenSet& r) { return r.name == key; });
      if ((peft_field && !peft) || (quant_field && !four_bit) || refused_when_set ||
          (key == "gradient_checkpointing_kwargs" && !checkpointing) || (key == "packing_strategy"))
        use = FieldUse::kUnused;
      if (key == "max_grad_norm") use = config.set(key) ? FieldUse::kClip : FieldUse::kNoMemory;
    }
    if (use != FieldUse::kRead) out.ignored.push_back({key, why_ignored(use)});
  }
  return out;
}

}  // namespace

Result<TrainerFile> read_trl_yaml(const std::string& text, const std::string& path, const TrainerFileContext& context) {
  try {
    return read_sft_config(load_yaml(text), path, context);
  } catch (const YAML::Exception& e) {  // not YAML, or a node of a shape the reader did not expect
    return refuse(path + ":" + std::to_string(e.mark.line + 1),
                  "is not a config trl sft reads (" + escaped(e.msg) + "); give a TRL config (YAML)");
  }
}

}  // namespace census
