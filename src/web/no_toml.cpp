// The page's module is built without toml++: Debian ships its headers for the host's compiler, not in
// emscripten's sysroot, and the page reads no trainer's file. The reader of torchtitan's job config
// (run/torchtitan_toml.cpp) is left out of it, and this refuses --from in one line.
#include "run/torchtitan_toml.h"

namespace census {

Result<TrainerFile> read_torchtitan_toml(const std::string&, const std::string&, const TrainerFileContext&) {
  return refuse("--from", "the browser page reads no trainer's file; run the census command for it");
}

}  // namespace census
