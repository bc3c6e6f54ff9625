// File: lora_choice.h
// Which LoRA runs census step prices (StepOptions::lora, nn/lora.h), and the refusals of the rest: each
// names the option and says what to do. Checked against the oracle's LoRA cases (PEFT's get_peft_model on
// Transformers' model): one rank's whole model, plain or under full checkpointing, with AdamW, Transformers'
// loss or TRL's chunked one, and TRL's activation offloading, on the families
// that set Family::peft_lora; a MoE family's attention alone (its experts are no nn.Linear, and
// all-linear reaches them through PEFT's target_parameters, which is not priced yet).
#pragma once

#include <cstdint>

#include "models/config.h"
#include "step/step_options.h"
#include "util/result.h"

namespace census {

// The largest LoRA rank census step takes (--lora-rank): 2^20, above any layer's width.
inline constexpr int64_t kLargestLoraRank = int64_t{1} << 20;

Status check_lora(const ModelConfig& config, const StepOptions& o);

// `lora` with its targets as PEFT resolves them on `config`'s model type: target_modules left out, the
// type's default (Family::lora_default_targets); the expert names PEFT's v5 conversion drops from them
// (Family::peft_expert_names). The step and the plan's time model build their adapters from it.
nn::LoraConfig resolved_lora(const ModelConfig& config, nn::LoraConfig lora);

}  // namespace census
