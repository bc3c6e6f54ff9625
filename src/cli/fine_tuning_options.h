// File: fine_tuning_options.h
// The fine-tuning options census step and census plan share, as a Run holds them (run/run.h): PEFT's
// LoRA (--lora, --lora-rank, --lora-alpha, --lora-dropout, --lora-targets, --lora-dtype, --use-dora),
// bitsandbytes' 4-bit base (--quantize, --double-quant, --quant-storage, --compute-dtype, --bnb-version,
// --prepare-kbit) and the HF Trainer's autocast (--autocast, --load-dtype): their flags, the checks of
// their names, and the StepOptions they make (step/lora_choice.h, step/quantize_choice.h,
// step/autocast_choice.h check the rest).
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "models/config.h"
#include "nn/linear4bit.h"
#include "nn/lora.h"
#include "run/run.h"
#include "step/step_options.h"
#include "util/result.h"

namespace census::cli {

void add_fine_tuning_options(CLI::App& sub, Run& run);

// Each option's value by its rule (the command line reads them so; Python's arguments and a trainer's
// file meet the same rule here), and the 4-bit options refused without --quantize.
Status check_fine_tuning_names(const Run& run);

// Whether any LoRA option is given (each implies --lora).
bool uses_lora(const Run& run);
// The adapters the options ask for: LoraConfig's default where one is left out; none without LoRA.
std::optional<nn::LoraConfig> lora_config_of(const Run& run);
// The 4-bit base asked for, or none.
std::optional<nn::Bnb4bitConfig> quantize_config_of(const Run& run);
// ", nf4 4-bit base (double quant, bf16 compute, uint8 storage, bitsandbytes 0.50)", or nothing.
std::string quantize_label(const Run& run);
// The module names LoRA targets: all-linear, the names given, or the model type's default.
nlohmann::ordered_json lora_targets_json(const nn::LoraConfig& lora, const ModelConfig& config);
// ", LoRA r 16 alpha 32 on all-linear, fp32 adapters (the base frozen)", or nothing.
std::string lora_label(const Run& run, const ModelConfig& config);
// The census step flags of the run's fine-tuning alone (step_flags' of those fields).
std::vector<std::string> fine_tuning_flags(const Run& run);
// `options`' lora, quantize, autocast and load_dtype, as the run asks them.
void set_fine_tuning(const Run& run, StepOptions& options);

}  // namespace census::cli
