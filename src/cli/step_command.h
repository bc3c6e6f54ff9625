// File: step_command.h
// `census step CONFIG ...`: one rank's whole training step (step/step_census.h), with the composed
// terms (step/step_compose.h) and the user's overhead terms, as a table or as JSON in the step
// oracle's names.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "models/config.h"
#include "run/run.h"
#include "util/result.h"

namespace census::cli {

// `census step`'s arguments: the run it prices (run/run.h), read from the flags or from a trainer's file
// (--from), and how the answer is shown.
struct StepArgs : Run {
  std::optional<int64_t> stage;   // not given: every stage
  std::vector<std::string> from;  // --from TRAINER FILE: the run read from a trainer's file (run/trainer_file.h)
  bool seq_length_given = false;  // --seq-length was given (beside --from, for a file that leaves it open)
  std::string format = "table";
  bool explain = false;
  // PyTorch's caching allocator over the step (cli/step_allocator.h)
  bool allocator = false;
  std::string alloc_conf;
  std::string gpu_memory;
};

CLI::App* add_step_command(CLI::App& app, StepArgs& args);
// Beside --from, a flag given that describes the run is refused: the file states it (the flags of
// which step, which machine and how to show it are taken).
Status check_flags_beside_from(const CLI::App& step, const StepArgs& args);
// Run a parsed `census step`: 0, or 2 with one line on `err` for input it refuses.
int run_step_command(const StepArgs& args, std::ostream& out, std::ostream& err);

// The step of `config` as `args` ask (args.model only names it), as the JSON `--format json` prints:
// one stage's object, or {"stages": [...], "worst_stage", "total_bytes"} for every stage. Refused: an
// option value the step does not know, or what census_step refuses.
Result<nlohmann::ordered_json> step_report_json(const StepArgs& args, const ModelConfig& config);

}  // namespace census::cli
