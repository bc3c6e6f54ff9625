#include "run/trainer_file.h"

namespace census {

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
