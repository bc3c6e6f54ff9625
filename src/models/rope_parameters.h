// File: rope_parameters.h
// What a config's rope_parameters say about the shapes a census counts: the rotary width. (The theta,
// the scaling type and its factors change cos and sin's values, not their sizes, and the model computes
// them outside the layer.)
#pragma once

#include "models/config.h"
#include "models/config_reader.h"

namespace census {

// The factor stated in `rope` (a rope_parameters object, or one of its per-layer-type entries), else
// at the config's top level, else `fallback`.
Result<double> read_partial_rotary_factor(const ConfigReader& reader, const nlohmann::json* rope, double fallback);
// rotary_dim = int(head_dim * partial_rotary_factor) from rope_parameters (or the top level), refused
// unless even and positive.
Status read_partial_rotary_dim(const ConfigReader& reader, ModelConfig& config, double fallback);
// The same width for a factor already read.
Result<int64_t> rotary_width(int64_t head_dim, double factor);

}  // namespace census
