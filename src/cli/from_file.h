// File: from_file.h
// What `census step --from` and `census plan --from` share: the flags refused beside a trainer's file (the
// file states the run), and what the command prints of the file it read (as JSON, and as the lines above its
// answer).
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <initializer_list>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "run/trainer_file.h"
#include "util/result.h"

namespace census::cli {

// The file --from names (TRAINER FILE), read as the command's `context` says; none without --from.
Result<std::optional<TrainerFile>> read_from(const std::vector<std::string>& from, const TrainerFileContext& context);

// Refused: a flag of `command` given beside --from that is not among `taken` (the flags that do not state
// the run), even at its default value.
Status check_flags_beside_file(const CLI::App& command, std::initializer_list<std::string_view> taken);

// What --from read, as JSON: the trainer and the file, its format, `flags` (the command's flags that state the
// same run), what was ignored and why, and the notes.
nlohmann::ordered_json trainer_file_json(const std::vector<std::string>& from, const TrainerFile& file,
                                         const std::vector<std::string>& flags);

// The lines above the answer: "from FILE (FORMAT): COMMAND", what was ignored, and the notes.
void print_trainer_file(const std::vector<std::string>& from, const TrainerFile& file, const std::string& command,
                        std::ostream& out);

}  // namespace census::cli
