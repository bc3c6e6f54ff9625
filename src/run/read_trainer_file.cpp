#include "run/read_trainer_file.h"

#include <array>

#include "run/torchtitan_toml.h"
#include "run/torchtune_yaml.h"
#include "run/trl_yaml.h"
#include "util/escape.h"
#include "util/read_file.h"

namespace census {

std::span<const std::string_view> trainer_names() {
  static constexpr std::array<std::string_view, 3> kNames{"torchtitan", "torchtune", "trl"};
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
  if (trainer == "trl") {
    auto text = read_regular_file(path, "give a trl sft config (YAML)");
    CENSUS_TRY(text);
    return read_trl_yaml(*text, path, context);
  }
  return refuse("--from " + echoed(std::string(trainer)),
                "is not a trainer whose files Census reads; give torchtitan (its TOML job config), torchtune (a "
                "recipe config) or trl (a trl sft config)");
}

}  // namespace census
