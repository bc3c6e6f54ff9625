// File: quantize_choice.h
// Which 4-bit base census step prices (StepOptions::quantize, nn/linear4bit.h), and the refusals of the rest:
// each names the option and says what to do. Checked against the oracle's QLoRA cases (Transformers'
// bitsandbytes quantization of the model, PEFT's prepare_model_for_kbit_training and get_peft_model, from
// their sources) on the families the oracle quantizes: one rank's whole model, adapters training beside the
// frozen 4-bit base. On a mixture of experts (Mixtral, Qwen3-MoE, GPT-OSS) and Qwen3-Next's hybrid, the
// experts and routers are no nn.Linear: Transformers leaves them in bf16, and the attention's projections (and
// Qwen3-Next's linear attention and shared expert) are quantized.
#pragma once

#include "models/config.h"
#include "step/step_options.h"
#include "util/result.h"

namespace census {

Status check_quantize(const ModelConfig& config, const StepOptions& o);

}  // namespace census
