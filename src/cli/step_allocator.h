// File: step_allocator.h
// `census step --allocator [--alloc-conf TEXT] [--gpu-memory BYTES]`: PyTorch's caching allocator
// simulated over the step (step/step_alloc.h), its figures beside the step's: peak reserved, peak
// allocated, the requested peak (the step's own), the largest inactive split, num_alloc_retries, and
// whether the step runs out of memory at --gpu-memory. The options, their refusals, the table block
// and the JSON object ("allocator") of one stage.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <vector>

#include "step/step_alloc.h"
#include "cli/step_command.h"
#include "util/result.h"

namespace census::cli {

void add_allocator_options(CLI::App* step, StepArgs& args);

// The allocator's options as `args` ask (none without --allocator). Refused: --alloc-conf or
// --gpu-memory without --allocator, text PyTorch would refuse, --fragmentation beside --allocator (the
// allocator simulates what it stands for), a --gpu-memory the named terms leave nothing of.
Result<std::optional<StepAllocatorOptions>> allocator_options(const StepArgs& args);

nlohmann::ordered_json allocator_json(const StepAllocatorCensus& allocator, const StepArgs& args);

// The block `census step` prints under a stage's table.
void print_allocator(const StepAllocatorCensus& allocator, const StepArgs& args, std::ostream& out);

// Every stage's reserved beside allocated, where the step runs every stage.
void print_allocator_stages(const std::vector<std::pair<int64_t, const StepAllocatorCensus*>>& stages,
                            std::ostream& out);

}  // namespace census::cli
