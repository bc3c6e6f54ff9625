#include "run/trainer_file.h"

#include <array>

#include "run/torchtitan_toml.h"
#include "util/escape.h"
#include "util/read_file.h"

namespace census {

std::span<const std::string_view> trainer_names() {
  static constexpr std::array<std::string_view, 1> kNames{"torchtitan"};
  return kNames;
}

Result<TrainerFile> read_trainer_file(std::string_view trainer, const std::string& path, const TrainerFileContext& context) {
  if (trainer != "torchtitan")
    return refuse("--from " + echoed(std::string(trainer)),
                  "is not a trainer whose files Census reads; give torchtitan (its TOML job config)");
  auto text = read_regular_file(path, "give torchtitan's TOML job config");
  CENSUS_TRY(text);
  return read_torchtitan_toml(*text, path, context);
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
