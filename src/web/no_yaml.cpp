// The page's module is built without yaml-cpp: Debian ships it compiled for the host only, and the
// page offers no stack file or recipe. The readers of `--layers` and `--train-yaml` (cli/stack_file.cpp,
// cli/train_yaml.cpp) are left out of it, and these refuse the options in one line, as any option
// the census cannot honour is refused.
#include "cli/stack_file.h"
#include "cli/train_yaml.h"

namespace census::cli {
namespace {

Refusal not_in_the_page(const char* flag) {
  return refuse(flag, "the browser page reads no stack file or recipe; run the census command for it");
}

}  // namespace

Result<std::vector<LayerGroup>> read_stack_file(const std::string&, const ModelConfig&) {
  return not_in_the_page("--layers");
}
Result<std::vector<LayerGroup>> read_stack_text(const std::string&, const std::string&, const ModelConfig&) {
  return not_in_the_page("--layers");
}
Result<std::vector<ReplacementSpec>> read_train_yaml(const std::string&) { return not_in_the_page("--train-yaml"); }
Result<std::vector<ReplacementSpec>> read_train_yaml_text(const std::string&, const std::string&) {
  return not_in_the_page("--train-yaml");
}

}  // namespace census::cli
