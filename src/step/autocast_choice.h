// File: autocast_choice.h
// Where census step prices the HF Trainer's autocast (StepOptions::autocast, ops/autocast.h), and the
// refusals of the rest: each names the option and says what to do. Checked against the oracle's autocast
// cases (Transformers' model loaded in fp32, accelerate's wrapped forward, CUDA's autocast lists, PEFT's LoRA
// on the fp32 base) on one rank's whole model.
#pragma once

#include "models/config.h"
#include "step/step_options.h"
#include "util/result.h"

namespace census {

Status check_autocast(const ModelConfig& config, const StepOptions& o);

}  // namespace census
