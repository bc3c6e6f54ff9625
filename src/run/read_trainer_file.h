// File: read_trainer_file.h
// `census step --from TRAINER FILE`: the trainer's file read by that trainer's reader (run/torchtitan_toml.h,
// run/torchtune_yaml.h) into the run it states (run/trainer_file.h).
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "run/trainer_file.h"
#include "util/result.h"

namespace census {

// The trainers whose files Census reads, as --from names them.
std::span<const std::string_view> trainer_names();

// The run of the file at `path`, written for `trainer` (one of trainer_names()). Refused, in one line
// naming the file and the field: an unknown trainer, a file that cannot be read or parsed, a section or
// field the trainer does not have, a value of the wrong type, a field that moves memory and is not
// priced, or a model name without a shipped config (the step's own config argument then names it).
Result<TrainerFile> read_trainer_file(std::string_view trainer, const std::string& path, const TrainerFileContext& context);

}  // namespace census
