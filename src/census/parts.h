// File: parts.h
// The parts of a decoder layer as the cost model prices them: attention (its projections), scores
// (QK and AV at every pair of tokens), linrec (a linear attention's recurrence), norm, ffn (the dense
// feed-forward, and the layer's own code such as residual adds), shared, routed, router.
//
// A parameter belongs to a part by its path (parameter_part); an op to the part of the innermost
// module running it (part_of_op), or to the scores when it is the attention kernel.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "models/config.h"
#include "ops/dispatch.h"

namespace census {

using PartCounts = std::map<std::string, int64_t>;

// "self_attn.q_proj.weight" -> "attention"; "self_attn.q_norm.weight" -> "norm"; "mlp.up_proj.weight" -> "ffn".
std::string_view parameter_part(std::string_view name);

// The part an op runs for: that of its innermost module's weight; "ffn" outside every module; and,
// where `recurrent`, "linrec" for an attention op no parameter takes part in.
std::string_view part_of_op(const OpCall& call, const std::vector<ModuleFrame>& modules, bool recurrent);

// Forward FLOPs of layer `layer_index` on one sequence, by part (matmuls and the attention kernel).
PartCounts census_flops(const ModelConfig& config, int64_t layer_index, int64_t seq_length);

// What one forward moves, by part: bytes read and written by every op that is not a view, the
// parameters' share of them, and the ops launched.
struct LayerTraffic {
  PartCounts moved;
  PartCounts parameter;
  PartCounts launches;
};
LayerTraffic census_traffic(const ModelConfig& config, int64_t layer_index, int64_t seq_length);

// Parameters of layer `layer_index` by part, and those of the model's final norm.
struct LayerParameters {
  PartCounts parts;
  int64_t final_norm = 0;
};
LayerParameters census_parameters(const ModelConfig& config, int64_t layer_index);

}  // namespace census
