// The page reads no trainer's file, and its module is built without yaml-cpp (Debian ships it compiled for
// the host alone). The readers of torchtitan's job config, torchtune's recipe config and TRL's config
// (run/torchtitan_toml.cpp, run/torchtune_yaml.cpp, run/trl_yaml.cpp) are left out of it, and these refuse
// --from in one line.
#include "run/torchtitan_toml.h"
#include "run/torchtune_yaml.h"
#include "run/trl_yaml.h"

namespace census {
namespace {

Refusal not_in_the_page() {
  return refuse("--from", "the browser page reads no trainer's file; run the census command for it");
}

}  // namespace

Result<TrainerFile> read_torchtitan_toml(const std::string&, const std::string&, const TrainerFileContext&) {
  return not_in_the_page();
}
Result<TrainerFile> read_torchtune_yaml(const std::string&, const std::string&, const TrainerFileContext&) {
  return not_in_the_page();
}
Result<TrainerFile> read_trl_yaml(const std::string&, const std::string&, const TrainerFileContext&) {
  return not_in_the_page();
}

}  // namespace census
