#include "cli/fine_tuning_options.h"

#include <sstream>
#include <string>

#include "cli/options.h"
#include "models/registry.h"
#include "report/table.h"
#include "step/lora_choice.h"

namespace census::cli {

namespace {

// LoRA's options (nn/lora.h). alpha and p are held to their open bounds by the step's check (check_lora).
constexpr IntegerRule kLoraRankRule{"--lora-rank", 1, kLargestLoraRank, "the largest rank census prices"};
constexpr NumberRule kLoraAlphaRule{"--lora-alpha", 0, 1e12, ""};
constexpr NumberRule kLoraDropoutRule{"--lora-dropout", 0, 1, ""};

// The first option given that describes a 4-bit base (--quantize aside), or nullptr.
const char* quantize_option_given(const Run& a) {
  return a.double_quant               ? "--double-quant"
         : !a.quant_storage.empty()   ? "--quant-storage"
         : !a.compute_dtype.empty()   ? "--compute-dtype"
         : !a.bnb_version.empty()     ? "--bnb-version"
         : a.prepare_kbit             ? "--prepare-kbit"
                                      : nullptr;
}

DType dtype_named(const std::string& name) {
  return name == "bf16" ? DType::kBFloat16 : name == "fp32" ? DType::kFloat32 : DType::kUInt8;
}

}  // namespace

bool uses_lora(const Run& a) {
  return a.lora || a.lora_rank || a.lora_alpha || a.lora_dropout || !a.lora_targets.empty() || !a.lora_dtype.empty() ||
         a.use_dora || !a.modules_to_save.empty();
}

std::optional<nn::LoraConfig> lora_config_of(const Run& a) {
  if (!uses_lora(a)) return std::nullopt;
  nn::LoraConfig lora;
  if (a.lora_rank) lora.r = *a.lora_rank;
  if (a.lora_alpha) lora.alpha = *a.lora_alpha;
  if (a.lora_dropout) lora.dropout = *a.lora_dropout;
  lora.all_linear = a.lora_targets == "all-linear";
  if (!lora.all_linear && a.lora_targets != "default") lora.target_modules = nn::lora_target_list(a.lora_targets);
  lora.dtype = a.lora_dtype == "bf16" ? DType::kBFloat16 : DType::kFloat32;
  // On a base loaded in fp32 (the Trainer's autocast) PEFT makes the adapters in its dtype, fp32, whether
  // autocast_adapter_dtype upcasts or not: --lora-dtype bf16 asks for what PEFT does not make.
  if (a.autocast == "bf16" && a.load_dtype != "bf16") lora.dtype = DType::kFloat32;
  lora.use_dora = a.use_dora;
  lora.modules_to_save = nn::lora_target_list(a.modules_to_save);
  return lora;
}

// Its names checked by check_fine_tuning_names; --quantize's absence beside adapters by check_quantize.
std::optional<nn::Bnb4bitConfig> quantize_config_of(const Run& a) {
  if (a.quantize.empty()) return std::nullopt;
  nn::Bnb4bitConfig q;
  q.quant_type = a.quantize == "nf4" ? nn::Bnb4bitType::kNf4 : nn::Bnb4bitType::kFp4;
  q.double_quant = a.double_quant;
  if (!a.quant_storage.empty()) q.quant_storage = dtype_named(a.quant_storage);
  if (!a.compute_dtype.empty()) q.compute_dtype = dtype_named(a.compute_dtype);
  q.version = a.bnb_version == nn::bnb_version_name(ops::BnbVersion::k0_49) ? ops::BnbVersion::k0_49
                                                                           : ops::BnbVersion::k0_50;
  q.prepare_kbit = a.prepare_kbit;
  return q;
}

void add_fine_tuning_options(CLI::App& app, Run& a) {
  CLI::App* sub = &app;
  sub->add_flag("--lora", a.lora,
                "PEFT's LoRA as get_peft_model builds it: the base frozen (no gradient, no optimizer state), "
                "adapters lora_A (r, in) and lora_B (out, r) on the targeted Linears, trained; PEFT's defaults for "
                "each --lora-* option left out (r 8, alpha 8, dropout 0, the model type's targets, fp32 adapters)");
  add_integer_option(*sub, kLoraRankRule, a.lora_rank, "LoRA's rank r (PEFT's default 8); implies --lora");
  add_number_option(*sub, kLoraAlphaRule, a.lora_alpha,
                    "LoRA's lora_alpha, the scaling alpha / r (PEFT's default 8); implies --lora");
  add_number_option(*sub, kLoraDropoutRule, a.lora_dropout,
                    "LoRA's dropout p on each adapter's input (PEFT's default 0: none); on CUDA a new tensor and a "
                    "bool mask per adapted Linear; implies --lora");
  add_text_option(*sub, "--lora-targets", a.lora_targets,
                  "the Linears LoRA adapts: default (PEFT's for the model type, q_proj,v_proj on Llama-like "
                  "models), all-linear (every Linear but the LM head), or module names, comma-separated; implies "
                  "--lora",
                  "give default, all-linear or module names (q_proj,v_proj), or leave the option out");
  add_choice_option(*sub, "--lora-dtype", a.lora_dtype, {"fp32", "bf16"},
                    "the adapters' dtype: fp32 (PEFT's autocast_adapter_dtype=True, the default: each adapted "
                    "Linear keeps an fp32 copy of its input) or bf16 (the base's); implies --lora");
  sub->add_flag("--use-dora", a.use_dora,
                "DoRA, as LoraConfig(use_dora=True) runs it: a trained magnitude vector beside each adapter pair, and "
                "in each forward the adapters' weight, an fp32 copy of the base weight and its row norms; implies "
                "--lora");
  add_text_option(*sub, "--modules-to-save", a.modules_to_save,
                  "PEFT's modules_to_save: lm_head, embed_tokens or both, comma-separated, each kept as "
                  "ModulesToSaveWrapper keeps it, the original frozen beside a trained copy (as a run that adds "
                  "tokens trains them); implies --lora",
                  "give lm_head, embed_tokens or both, or leave the option out");
  add_choice_option(*sub, "--autocast", a.autocast, {"bf16"},
                    "the HF Trainer's bf16=True on a model loaded in fp32, as accelerate runs it: the weights, "
                    "gradients and optimizer states fp32, the forward under torch.autocast (CUDA's op lists, its "
                    "cast cache) and an fp32 copy of the logits at its end");
  add_choice_option(*sub, "--load-dtype", a.load_dtype, {"fp32", "bf16"},
                    "with --autocast: the dtype the model is loaded in, fp32 (the default) or bf16 (Transformers 5's "
                    "dtype=\"auto\" on a bf16 checkpoint, as TRL loads it)");
  add_choice_option(*sub, "--quantize", a.quantize, {"nf4", "fp4"},
                    "a bitsandbytes 4-bit base, as BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type=...) "
                    "loads it: every Linear but the LM head a frozen Linear4bit, its weight packed two to a byte "
                    "beside its quantization state; needs adapters to train (--lora)");
  sub->add_flag("--double-quant", a.double_quant,
                "with --quantize: bnb_4bit_use_double_quant, the absmax quantized to 8 bits (off by default)");
  add_choice_option(*sub, "--quant-storage", a.quant_storage, {"uint8", "bf16", "fp32"},
                    "with --quantize: bnb_4bit_quant_storage, the packed weight's dtype (uint8 by default; the same "
                    "bytes, bf16 is what FSDP shards)");
  add_choice_option(*sub, "--compute-dtype", a.compute_dtype, {"fp32", "bf16"},
                    "with --quantize: bnb_4bit_compute_dtype (fp32, BitsAndBytesConfig's default): the input cast to "
                    "it, the product and the weight dequantized in it");
  add_choice_option(*sub, "--bnb-version", a.bnb_version, {"0.50", "0.49"},
                    "with --quantize: how bitsandbytes runs the 4-bit product: 0.50 (default) its fused kernel, the "
                    "weight dequantized past 1536 tokens; 0.49 the weight dequantized in every forward; both "
                    "dequantize it in the backward");
  sub->add_flag("--prepare-kbit", a.prepare_kbit,
                "with --quantize: PEFT's prepare_model_for_kbit_training's casts, every other bf16 parameter to "
                "fp32 (embedding, norms, head), which runs the residual stream in fp32; its checkpointing is "
                "--recompute full-reentrant");
}

Status check_fine_tuning_names(const Run& a) {
  if (!a.lora_dtype.empty()) CENSUS_TRY(parse_choice("--lora-dtype", {"fp32", "bf16"}, a.lora_dtype));
  if (!a.quantize.empty()) CENSUS_TRY(parse_choice("--quantize", {"nf4", "fp4"}, a.quantize));
  if (!a.autocast.empty()) CENSUS_TRY(parse_choice("--autocast", {"bf16"}, a.autocast));
  if (!a.load_dtype.empty()) CENSUS_TRY(parse_choice("--load-dtype", {"fp32", "bf16"}, a.load_dtype));
  if (!a.quant_storage.empty()) CENSUS_TRY(parse_choice("--quant-storage", {"uint8", "bf16", "fp32"}, a.quant_storage));
  if (!a.compute_dtype.empty()) CENSUS_TRY(parse_choice("--compute-dtype", {"fp32", "bf16"}, a.compute_dtype));
  if (!a.bnb_version.empty()) CENSUS_TRY(parse_choice("--bnb-version", {"0.50", "0.49"}, a.bnb_version));
  if (const char* option = quantize_option_given(a); option != nullptr && a.quantize.empty())
    return refuse(std::string(option) + " without --quantize", "it describes a 4-bit base; give --quantize nf4 or fp4");
  if (a.lora_rank) CENSUS_TRY(check_integer(kLoraRankRule, *a.lora_rank));
  if (a.lora_alpha) CENSUS_TRY(check_number(kLoraAlphaRule, *a.lora_alpha));
  if (a.lora_dropout) CENSUS_TRY(check_number(kLoraDropoutRule, *a.lora_dropout));
  // A list that names nothing (",") would read as the default; each name's rule is the step's (check_lora).
  if (!a.lora_targets.empty() && a.lora_targets != "default" && a.lora_targets != "all-linear" &&
      nn::lora_target_list(a.lora_targets).empty())
    return refuse("--lora-targets", "names no module; give default, all-linear or module names (q_proj,v_proj)");
  if (!a.modules_to_save.empty() && nn::lora_target_list(a.modules_to_save).empty())
    return refuse("--modules-to-save", "names no module; give lm_head, embed_tokens or both");
  return {};
}

// ", nf4 4-bit base (double quant, bf16 compute, uint8 storage, bitsandbytes 0.50)", or nothing.
std::string quantize_label(const Run& a) {
  const std::optional<nn::Bnb4bitConfig> q = quantize_config_of(a);
  if (!q) return "";
  std::string label = ", " + std::string(nn::bnb_4bit_type_name(q->quant_type)) + " 4-bit base (" +
                      (q->double_quant ? "double quant, " : "") + std::string(dtype_name(q->compute_dtype)) +
                      " compute, " + std::string(dtype_name(q->quant_storage)) + " storage, bitsandbytes " +
                      std::string(nn::bnb_version_name(q->version)) + ")";
  if (q->prepare_kbit) label += ", prepare_model_for_kbit_training's fp32 casts";
  return label;
}

// The module names LoRA targets: all-linear, the names given, or the model type's default.
nlohmann::ordered_json lora_targets_json(const nn::LoraConfig& lora, const ModelConfig& config) {
  if (lora.all_linear) return "all-linear";
  if (!lora.target_modules.empty()) return lora.target_modules;
  return config.family->lora_default_targets ? nn::lora_target_list(config.family->lora_default_targets)
                                             : std::vector<std::string>();
}

// ", LoRA r 16 alpha 32 on all-linear, fp32 adapters (the base frozen)", or nothing.
std::string lora_label(const Run& a, const ModelConfig& config) {
  const std::optional<nn::LoraConfig> lora = lora_config_of(a);
  if (!lora) return "";
  const nlohmann::ordered_json targets = lora_targets_json(*lora, config);
  std::string names;
  if (targets.is_string()) {
    names = targets.get<std::string>();
  } else {
    for (const auto& name : targets) names += (names.empty() ? "" : ",") + name.get<std::string>();
  }
  std::ostringstream label;
  std::string saved;
  for (const std::string& name : lora->modules_to_save) saved += (saved.empty() ? "" : ",") + name;
  label << (lora->use_dora ? ", DoRA r " : ", LoRA r ") << lora->r << " alpha " << figure(lora->alpha)
        << (lora->dropout > 0 ? " dropout " + figure(lora->dropout) : "") << " on " << names << ", "
        << (lora->dtype == DType::kBFloat16 ? "bf16" : "fp32") << " adapters (the base frozen"
        << (saved.empty() ? "" : "; a trained copy of " + saved) << ")";
  return label.str();
}

std::vector<std::string> fine_tuning_flags(const Run& a) {
  Run tuning;
  tuning.lora = a.lora, tuning.lora_rank = a.lora_rank, tuning.lora_alpha = a.lora_alpha;
  tuning.lora_dropout = a.lora_dropout, tuning.lora_targets = a.lora_targets, tuning.lora_dtype = a.lora_dtype;
  tuning.use_dora = a.use_dora, tuning.modules_to_save = a.modules_to_save;
  tuning.quantize = a.quantize, tuning.double_quant = a.double_quant, tuning.quant_storage = a.quant_storage;
  tuning.compute_dtype = a.compute_dtype, tuning.bnb_version = a.bnb_version, tuning.prepare_kbit = a.prepare_kbit;
  tuning.autocast = a.autocast, tuning.load_dtype = a.load_dtype;
  std::vector<std::string> flags = step_flags(tuning);
  flags.erase(flags.begin());  // the model
  return flags;
}

void set_fine_tuning(const Run& a, StepOptions& o) {
  o.lora = lora_config_of(a);
  o.quantize = quantize_config_of(a);
  o.autocast = a.autocast == "bf16";
  if (!a.load_dtype.empty()) o.load_dtype = a.load_dtype == "fp32" ? DType::kFloat32 : DType::kBFloat16;
}

}  // namespace census::cli
