#include "run/trainer_file.h"

#include <array>

#include "run/torchtitan_toml.h"
#include "run/torchtune_yaml.h"
#include "util/escape.h"
#include "util/read_file.h"

namespace census {

std::span<const std::string_view> trainer_names() {
  static constexpr std::array<std::string_view, 2> kNames{"torchtitan", "torchtune"};
  return kNames;
}

Result<TrainerFile> read_trainer_file(std::string_view trainer, const std::string& path, const TrainerFileContext& context) {
  if (trainer == "torchtitan") {
    auto text = read_regular_file(path, "give torchtitan's TOML job config");
    CENSUS_TRY(text);
    return read_torchtitan_toml(*text, path, context);
  }
  if (trainer == "torchtune") {
    auto text = read_regular_file(path, "give a torchtune recipe config (YAML)");
    CENSUS_TRY(text);
    return read_torchtune_yaml(*text, path, context);
  }
  return refuse("--from " + echoed(std::string(trainer)),
                "is not a trainer whose files Census reads; give torchtitan (its TOML job config) or torchtune (a "
                "recipe config)");
}

std::string_view why_ignored(FieldUse use) {
  switch (use) {
    case FieldUse::kNoMemory: return "they move no memory";
    case FieldUse::kBetweenSteps: return "they act between steps";
    case FieldUse::kUnused: return "this run does not use them";
    case FieldUse::kClip:
      return "not priced (the gradient clip's fp32 norm of each gradient, a few hundred bytes a tensor)";
    case FieldUse::kRead: break;
  }
  return "";
}

std::vector<std::string> ignored_lines(const std::vector<IgnoredField>& ignored) {
  std::vector<std::string> lines;
  std::vector<std::string_view> reasons;  // in the order first met
  for (const IgnoredField& f : ignored) {
    size_t i = 0;
    while (i < reasons.size() && reasons[i] != f.why) ++i;
    if (i == reasons.size()) {
      reasons.push_back(f.why);
      lines.push_back("ignored, " + std::string(f.why) + ": " + f.field);
    } else {
      lines[i] += ", " + f.field;
    }
  }
  return lines;
}

}  // namespace census
