// Fuzzing the recipe reader: any bytes as a train.yaml give module replacements, each with a factory
// the census knows, or a one-line refusal.
#include <cstddef>
#include <cstdint>
#include <string>

#include "cli/train_yaml.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace census;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto specs = cli::read_train_yaml_text(text, "train.yaml");
  if (!specs) {
    fuzz::expect_one_line(specs.refusal());
    return 0;
  }
  for (const ReplacementSpec& spec : *specs) {
    std::string why;
    if (spec.match.empty() || !known_factory(spec.factory, why)) __builtin_trap();
  }
  return 0;
}
