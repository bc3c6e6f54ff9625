// File: qwen2.h
// What the Qwen families' config readers share with Qwen2 (transformers/models/qwen2/configuration_qwen2.py).
#pragma once

#include "models/config.h"

namespace census {

// Qwen2 and Qwen3 derive layer_types when the config does not state them: sliding attention from
// max_window_layers on, where use_sliding_window is set.
Status read_qwen_layer_types(const ConfigReader& reader, ModelConfig& config);

}  // namespace census
