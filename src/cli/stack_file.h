// File: stack_file.h
// A model's layer stack as a planner states it (`--layers FILE`): a list of groups
// {kind, count, mtp}, in model order, in JSON or YAML, either bare or under a `layers` key.
//
//   - {kind: dense, count: 3}
//   - {kind: moe, count: 58}
//   - {kind: moe, count: 1, mtp: true}
#pragma once

#include <string>
#include <vector>

#include "models/config.h"
#include "util/result.h"

namespace census::cli {

// The groups of the file at `path` (a regular file), checked against `config`: keys kind, count and
// mtp only, each once; counts positive; multi-token-prediction groups last; the other groups' counts
// summing to the model's layers; each kind one the model has, at the layers where the model has it.
Result<std::vector<LayerGroup>> read_stack_file(const std::string& path, const ModelConfig& config);
// The same, of a file's text read already; `path` names it in a refusal.
Result<std::vector<LayerGroup>> read_stack_text(const std::string& text, const std::string& path,
                                                const ModelConfig& config);

}  // namespace census::cli
