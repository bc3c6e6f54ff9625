// File: train_yaml.h
// Reading a HyperParallel recipe's train.yaml for the module replacements it installs.
#pragma once

#include <string>
#include <vector>

#include "models/replacements.h"
#include "util/result.h"

namespace census::cli {

// The replacements of the file at `path`'s plan_overrides: one spec per entry with replace_module
// (a factory path, plain or {_target_: ...}), module_type and match (a pattern or a list). Entries
// with only a sharding action, or with a `when` condition, are skipped, as the reference does. An
// entry without module_type, with a match of another type, or with a factory the census does not
// know is refused, naming plan_overrides[i]. Only a regular file is read.
Result<std::vector<ReplacementSpec>> read_train_yaml(const std::string& path);
// The same, of a file's text read already; `path` names it in a refusal.
Result<std::vector<ReplacementSpec>> read_train_yaml_text(const std::string& text, const std::string& path);

}  // namespace census::cli
