// File: trainer_file.h
// What a reader of a trainer's own config file makes (`census step --from TRAINER FILE`, read_trainer_file.h).
// Each trainer's reader is a file of this folder: torchtitan's TOML job config (torchtitan_toml.h), torchtune's
// recipe config (torchtune_yaml.h). A reader makes
// the Run the file describes, as Census prices it: every field that moves memory is read, or refused by
// name where Census does not price it yet; every field that moves none is listed as ignored. Nothing
// in the file is dropped unseen: a section or field the trainer does not have is refused too.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "run/run.h"
#include "util/result.h"

namespace census {

// What a reader takes from outside the file.
struct TrainerFileContext {
  int64_t world = 0;  // the GPUs the run spans (--world), where the file leaves a degree to the launcher
  bool model_given = false;  // the step names the model's config itself: the file's model name is not mapped
  int64_t seq_length = 0;    // --seq-length beside the file, for a file that leaves it to the data; 0: not given
  const char* world_flag = "--world";  // the flag that gave `world`, as refusals name it (census plan's --gpus)
};

// What a reader does with a field of a trainer's file: reads it (it moves memory, or decides what does),
// or leaves it alone, for the reason named.
enum class FieldUse : uint8_t { kRead, kNoMemory, kBetweenSteps, kUnused, kClip };

// Why a field left alone moves no memory of the step, or why it is not priced: "they move no memory".
std::string_view why_ignored(FieldUse use);

// A field the reader saw and left alone, and why it moves no memory of the step (or why it is not priced).
struct IgnoredField {
  std::string field;  // as the file names it: "training.steps"
  std::string_view why;
};

struct TrainerFile {
  Run run;
  std::string format;                // what was read: "torchtitan's TOML job config (v0.1, v0.2)"
  std::vector<IgnoredField> ignored;  // in the file's order
  std::vector<std::string> notes;     // where the run Census prices differs from the trainer's, and how
};

// The ignored fields as lines, those with one reason together: "ignored, they move no memory: a, b".
std::vector<std::string> ignored_lines(const std::vector<IgnoredField>& ignored);

}  // namespace census
