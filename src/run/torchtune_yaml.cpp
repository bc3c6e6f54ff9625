#include "run/torchtune_yaml.h"

#include <algorithm>
#include <optional>
#include <string_view>
#include <vector>

#include "run/yaml_fields.h"
#include "run/yaml_text.h"
#include "util/escape.h"

namespace census {
namespace {

// The recipe config's top-level keys the full-finetune recipes read (cfg.x and cfg.get("x")), and the
// sections whose keys are the arguments of a component that moves no memory.
struct RecipeKey {
  std::string_view name;
  FieldUse use;
};
constexpr RecipeKey kKeys[] = {
    {"output_dir", FieldUse::kNoMemory},
    {"tokenizer", FieldUse::kRead},
    {"dataset", FieldUse::kRead},
    {"seed", FieldUse::kNoMemory},
    {"shuffle", FieldUse::kNoMemory},
    {"model", FieldUse::kRead},
    {"checkpointer", FieldUse::kBetweenSteps},
    {"resume_from_checkpoint", FieldUse::kBetweenSteps},
    {"enable_async_checkpointing", FieldUse::kBetweenSteps},
    {"batch_size", FieldUse::kRead},
    {"epochs", FieldUse::kNoMemory},
    {"optimizer", FieldUse::kRead},
    {"lr_scheduler", FieldUse::kNoMemory},
    {"loss", FieldUse::kRead},
    {"max_steps_per_epoch", FieldUse::kNoMemory},
    {"gradient_accumulation_steps", FieldUse::kRead},
    {"optimizer_in_bwd", FieldUse::kRead},
    {"clip_grad_norm", FieldUse::kRead},
    {"compile", FieldUse::kRead},
    {"device", FieldUse::kRead},
    {"enable_activation_checkpointing", FieldUse::kRead},
    {"enable_activation_offloading", FieldUse::kRead},
    {"ac_mode", FieldUse::kRead},
    {"ac_option", FieldUse::kRead},
    {"custom_sharded_layers", FieldUse::kRead},
    {"fsdp_cpu_offload", FieldUse::kRead},
    {"fsdp_reshard_after_forward", FieldUse::kRead},
    {"tensor_parallel_dim", FieldUse::kRead},
    {"tensor_parallel_plan", FieldUse::kRead},
    {"dtype", FieldUse::kRead},
    {"metric_logger", FieldUse::kNoMemory},
    {"log_every_n_steps", FieldUse::kNoMemory},
    {"log_peak_memory_stats", FieldUse::kNoMemory},
    {"log_level", FieldUse::kNoMemory},
    {"profiler", FieldUse::kNoMemory},
    {"cudnn_deterministic_mode", FieldUse::kNoMemory},
    {"collate_fn", FieldUse::kNoMemory},
};

// torchtune's model builders whose architecture a shipped config is (Transformers' names).
struct ShippedBuilder {
  std::string_view component;
  std::string_view model;
};
constexpr ShippedBuilder kBuilders[] = {
    {"torchtune.models.llama3_1.llama3_1_8b", "llama-3.1-8b"},
    {"torchtune.models.llama3_1.llama3_1_70b", "llama-3.1-70b"},
    {"torchtune.models.qwen2_5.qwen2_5_7b_base", "qwen2.5-7b"},
    {"torchtune.models.qwen2_5.qwen2_5_7b_instruct", "qwen2.5-7b"},
    {"torchtune.models.gemma2.gemma2_9b", "gemma-2-9b"},
    {"torchtune.models.gemma2.gemma2_27b", "gemma-2-27b"},
    {"torchtune.models.phi4.phi4_14b", "phi-4"},
};

// The optimizers Census prices, by the component torchtune instantiates.
struct ShippedOptimizer {
  std::string_view component;
  std::string_view optimizer;
};
constexpr ShippedOptimizer kOptimizers[] = {
    {"torch.optim.AdamW", "adamw"},
    {"bitsandbytes.optim.AdamW8bit", "adamw8bit"},
    {"bitsandbytes.optim.PagedAdamW8bit", "paged-adamw8bit"},
    {"torchao.optim.AdamW8bit", "torchao-adamw8bit"},
    {"torchao.optim.AdamW4bit", "torchao-adamw4bit"},
};

// The recipe's fields, and its components: a section whose _component_ names what torchtune instantiates.
class Recipe : public YamlFields {
 public:
  using YamlFields::YamlFields;

  // A component section's _component_.
  Result<std::string> component(const std::string& key) const {
    const YAML::Node node = at(key);
    if (!node.IsDefined() || node.IsNull()) return refused(key, "is missing; torchtune's recipes need it");
    if (!node.IsMap()) return refused(key, "must be a mapping with _component_");
    CENSUS_ASSIGN(std::string out, text_of(node["_component_"], key + "._component_"));
    if (out.empty()) return refused(key + "._component_", "is missing; name the component");
    return out;
  }
};

// A positive count from the file, at most `most`.
Result<int64_t> count(const Recipe& recipe, const std::string& key, int64_t left_out, int64_t most, const char* what) {
  CENSUS_ASSIGN(const std::optional<int64_t> value, recipe.integer(key));
  if (!value) return left_out;
  if (*value < 1 || *value > most)
    return recipe.refused(key, std::to_string(*value) + " " + what + ": give 1 to " + std::to_string(most));
  return *value;
}

}  // namespace

namespace {

Result<TrainerFile> read_recipe(const YAML::Node& root, const std::string& path, const TrainerFileContext& context) {
  if (!root.IsMap()) return refuse(path, "is not a mapping of a recipe's keys; give a torchtune recipe config");
  const Recipe recipe(path, root);
  TrainerFile out;
  out.format = "torchtune's recipe config, v0.6.1";
  Run& run = out.run;

  // The model.
  CENSUS_ASSIGN(const std::string model, recipe.component("model"));
  if (model.find("lora_") != std::string::npos)
    return recipe.refused("model._component_",
                          echoed(model) + " builds torchtune's own LoRALinear, which Census does not price (it prices "
                                          "PEFT's LoRA: census step --lora)");
  if (recipe.at("model").size() > 1)
    return recipe.refused("model", "has builder arguments beside _component_, which change the model; remove them");
  if (!context.model_given) {
    const auto shipped = std::find_if(std::begin(kBuilders), std::end(kBuilders),
                                      [&](const ShippedBuilder& b) { return b.component == model; });
    if (shipped == std::end(kBuilders))
      return recipe.refused("model._component_", echoed(model) +
                                                     " has no shipped config; give its config.json as the step's CONFIG "
                                                     "argument");
    run.model = std::string(shipped->model);
  }

  std::vector<std::string> keys;
  for (const auto& entry : root) {
    if (!entry.first.IsScalar()) return refuse(path, "has a key that is not a name; give a torchtune recipe config");
    const std::string key = entry.first.Scalar();
    const auto known = std::find_if(std::begin(kKeys), std::end(kKeys), [&](const RecipeKey& k) { return k.name == key; });
    if (known == std::end(kKeys))
      return refuse(path + ": " + echoed(key),
                    "is not a key torchtune's full-finetune recipes read; remove it, or give the run as flags");
    keys.push_back(key);
  }

  // What the recipe runs under that Census does not price.
  CENSUS_ASSIGN(const bool compile, recipe.flag("compile", false));
  if (compile)
    return recipe.refused("compile", "torch.compile fuses ops that Census prices as eager mode runs them; set it to "
                                     "False to price the eager run");
  CENSUS_ASSIGN(const std::string device, recipe.text_of(recipe.at("device"), "device"));
  if (!device.empty() && device != "cuda") return recipe.refused("device", echoed(device) + ": Census prices CUDA; give cuda");
  run.kernels = "cuda";  // the CUDA kernels' contracts (flash attention's), not the NPU's
  CENSUS_ASSIGN(const std::string dtype, recipe.text_of(recipe.at("dtype"), "dtype"));
  if (dtype != "bf16")
    return recipe.refused("dtype", (dtype.empty() ? std::string("is missing") : echoed(dtype)) +
                                       ": Census prices the bf16 model, its gradients and states; give bf16");
  if (recipe.given("ac_mode") || recipe.given("ac_option"))
    return recipe.refused(recipe.given("ac_mode") ? "ac_mode" : "ac_option",
                          "torchtune's selective checkpointing is not priced; remove it, or use "
                          "enable_activation_checkpointing");
  CENSUS_ASSIGN(const int64_t tensor_parallel, count(recipe, "tensor_parallel_dim", 1, 1, "ranks"));
  (void)tensor_parallel;  // 1 alone: torchtune's TP plans are not priced

  // The data: the sequence length a batch reaches.
  bool packed = false;
  const YAML::Node dataset = recipe.at("dataset");
  std::vector<YAML::Node> datasets;
  if (dataset.IsSequence())
    for (const YAML::Node& d : dataset) datasets.push_back(d);
  else if (dataset.IsDefined())
    datasets.push_back(dataset);
  for (const YAML::Node& d : datasets) {
    if (!d.IsMap()) return recipe.refused("dataset", "must be a mapping (or a list of them) with _component_");
    CENSUS_ASSIGN(const bool this_packed, recipe.flag_of(d["packed"], "dataset.packed", false));
    packed = packed || this_packed;
  }
  const YAML::Node tokenizer = recipe.at("tokenizer");
  if (tokenizer.IsDefined() && !tokenizer.IsNull() && !tokenizer.IsMap())
    return recipe.refused("tokenizer", "must be a mapping with _component_");
  CENSUS_ASSIGN(const std::optional<int64_t> max_seq_len,
                recipe.integer_of(tokenizer.IsMap() ? tokenizer["max_seq_len"] : YAML::Node(), "tokenizer.max_seq_len"));
  if (max_seq_len) {
    if (*max_seq_len < 1 || *max_seq_len > kLargestSeqLength)
      return recipe.refused("tokenizer.max_seq_len", std::to_string(*max_seq_len) + " tokens: give 1 to 2^32");
    if (context.seq_length != 0)
      return refuse("--seq-length beside --from",
                    "the recipe states the sequence length (tokenizer.max_seq_len); change the file, or drop --seq-length");
    run.seq_length = *max_seq_len;
    if (!packed)
      out.notes.emplace_back("torchtune pads each batch to its longest sequence: Census prices every batch at "
                             "tokenizer.max_seq_len, the longest it can be");
  } else {
    if (packed) return recipe.refused("tokenizer.max_seq_len", "is null, and a packed dataset needs it; give it");
    if (context.seq_length == 0)
      return recipe.refused("tokenizer.max_seq_len",
                            "is null: each batch is as long as its longest sequence; give the length to price with "
                            "--seq-length N");
    run.seq_length = context.seq_length;
  }
  CENSUS_ASSIGN(run.micro_batch_size, count(recipe, "batch_size", 1, kLargestMicroBatchSize, "sequences"));
  CENSUS_ASSIGN(run.micro_batches, count(recipe, "gradient_accumulation_steps", 1, kLargestMicroBatches, "micro-batches"));

  // Checkpointing and offloading.
  CENSUS_ASSIGN(const bool checkpointing, recipe.flag("enable_activation_checkpointing", false));
  CENSUS_ASSIGN(const bool offloading, recipe.flag("enable_activation_offloading", false));
  if (offloading && !checkpointing)
    return recipe.refused("enable_activation_offloading",
                          "torchtune refuses it without enable_activation_checkpointing; set that True");
  run.recompute = checkpointing ? "full" : "none";
  if (offloading) run.offload_activations = "torchtune";

  // The optimizer.
  CENSUS_ASSIGN(const std::string optimizer, recipe.component("optimizer"));
  const auto priced = std::find_if(std::begin(kOptimizers), std::end(kOptimizers),
                                   [&](const ShippedOptimizer& o) { return o.component == optimizer; });
  if (priced == std::end(kOptimizers))
    return recipe.refused("optimizer._component_",
                          echoed(optimizer) + " is not priced; give torch.optim.AdamW, bitsandbytes.optim.AdamW8bit or "
                                              "PagedAdamW8bit, or torchao.optim.AdamW8bit or AdamW4bit");
  run.optimizer = std::string(priced->optimizer);
  for (const auto& entry : recipe.at("optimizer")) {
    const std::string key = entry.first.Scalar();
    if (key == "_component_" || key == "lr" || key == "weight_decay" || key == "betas" || key == "eps") continue;
    const bool torch_adamw = run.optimizer == "adamw";
    if (torch_adamw && (key == "fused" || key == "foreach")) {
      CENSUS_ASSIGN(const bool on, recipe.flag_of(entry.second, "optimizer." + key, false));
      if (on) run.optimizer_impl = key;
      continue;
    }
    return recipe.refused("optimizer." + key, "is not priced (it may change the optimizer's memory); remove it");
  }
  if (run.optimizer == "adamw" && run.optimizer_impl.empty()) run.optimizer_impl = "foreach";  // torch's CUDA default
  if (run.optimizer != "adamw") run.optimizer_impl.clear();
  CENSUS_ASSIGN(run.optimizer_in_backward, recipe.flag("optimizer_in_bwd", false));
  if (recipe.given("clip_grad_norm") && run.optimizer_in_backward)
    return recipe.refused("clip_grad_norm", "torchtune refuses gradient clipping with optimizer_in_bwd; set it to null");
  if (run.optimizer_in_backward && run.micro_batches > 1)
    return recipe.refused("gradient_accumulation_steps", "torchtune refuses accumulation with optimizer_in_bwd; give 1");

  // The loss.
  CENSUS_ASSIGN(const std::string loss, recipe.component("loss"));
  if (loss == "torchtune.modules.loss.CEWithChunkedOutputLoss") run.loss = "torchtune-chunked";
  else if (loss == "torchtune.modules.loss.LinearCrossEntropyLoss") run.loss = "torchtune-linear";
  else
    return recipe.refused("loss._component_", echoed(loss) + " is not priced; give CEWithChunkedOutputLoss or "
                                                             "LinearCrossEntropyLoss (torchtune.modules.loss)");
  if (recipe.at("loss").size() > 1)
    return recipe.refused("loss", "has arguments beside _component_ (its chunks), which are not priced; remove them");

  // The ranks: full_finetune_distributed's FSDP2 over every GPU.
  const int64_t world = context.world == 0 ? 1 : context.world;
  run.world = context.world;
  CENSUS_ASSIGN(const bool cpu_offload, recipe.flag("fsdp_cpu_offload", false));
  CENSUS_ASSIGN(const bool reshard, recipe.flag("fsdp_reshard_after_forward", true));
  if (world > 1) {
    run.fsdp = true;
    run.dp = world;
    run.cpu_offload = cpu_offload;
    run.reshard_after_forward = reshard ? "true" : "false";
    const YAML::Node custom = recipe.at("custom_sharded_layers");
    if (custom.IsDefined() && !custom.IsNull()) {
      if (!custom.IsSequence()) return recipe.refused("custom_sharded_layers", "must be a list of module names");
      if (custom.size() > 0)
        out.notes.emplace_back("torchtune shards the modules custom_sharded_layers names (tok_embeddings, output) as "
                               "FSDP2 units of their own; Census's root unit holds the embedding, final norm and head");
    }
  }

  out.notes.emplace_back("Census re-runs Transformers' modeling of the architecture, not torchtune's model code");
  const bool distributed = world > 1;
  for (const std::string& key : keys) {
    const auto known = std::find_if(std::begin(kKeys), std::end(kKeys), [&](const RecipeKey& k) { return k.name == key; });
    FieldUse use = known->use;
    if (key == "clip_grad_norm") use = recipe.given(key) ? FieldUse::kClip : FieldUse::kNoMemory;
    if ((key == "fsdp_cpu_offload" || key == "fsdp_reshard_after_forward" || key == "custom_sharded_layers") && !distributed)
      use = FieldUse::kUnused;
    if (key == "tensor_parallel_plan") use = FieldUse::kUnused;  // tensor_parallel_dim is 1
    if (key == "tokenizer" || key == "dataset") {  // max_seq_len and packed read above; the rest moves nothing
      const YAML::Node section = recipe.at(key);
      for (const YAML::Node& part : section.IsSequence() ? std::vector<YAML::Node>(section.begin(), section.end())
                                                         : std::vector<YAML::Node>{section})
        if (part.IsMap())
          for (const auto& entry : part) {
            const std::string field = key + "." + (entry.first.IsScalar() ? entry.first.Scalar() : std::string("?"));
            if (field != "tokenizer.max_seq_len" && field != "dataset.packed")
              out.ignored.push_back({escaped(field.substr(0, kShownLength)), why_ignored(FieldUse::kNoMemory)});
          }
      continue;
    }
    if (use != FieldUse::kRead) out.ignored.push_back({key, why_ignored(use)});
  }
  return out;
}

}  // namespace

Result<TrainerFile> read_torchtune_yaml(const std::string& text, const std::string& path,
                                        const TrainerFileContext& context) {
  try {
    return read_recipe(load_yaml(text), path, context);
  } catch (const YAML::Exception& e) {  // not YAML, or a node of a shape the reader did not expect
    return refuse(path + ":" + std::to_string(e.mark.line + 1),
                  "is not a recipe config torchtune reads (" + escaped(e.msg) + "); give a torchtune recipe config");
  }
}

}  // namespace census
