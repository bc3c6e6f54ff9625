// Fuzzing the stack-file reader: any bytes as a --layers file, read against DeepSeek-V3 (dense, MoE
// and MTP groups) and Gemma-2 (alternating kinds), give the model's own layer order or a one-line
// refusal.
#include <cstddef>
#include <cstdint>
#include <string>

#include "cli/request.h"
#include "cli/stack_file.h"
#include "fuzz_check.h"

namespace {

const census::ModelConfig& model(const char* name) {
  static auto deepseek = census::cli::resolve_model("deepseek-v3");
  static auto gemma = census::cli::resolve_model("gemma-2-9b");
  auto& config = std::string(name) == "deepseek-v3" ? deepseek : gemma;
  if (!config) __builtin_trap();
  return *config;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace census;
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (const char* name : {"deepseek-v3", "gemma-2-9b"}) {
    const ModelConfig& config = model(name);
    auto groups = cli::read_stack_text(text, "stack.yaml", config);
    if (!groups) {
      fuzz::expect_one_line(groups.refusal());
      continue;
    }
    // Accepted: the body groups, expanded, are the model's own kinds layer by layer.
    const std::vector<std::string> kinds = layer_kinds(config);
    size_t layer = 0;
    for (const LayerGroup& group : *groups) {
      if (group.mtp) continue;
      for (int64_t i = 0; i < group.count; ++i, ++layer)
        if (layer >= kinds.size() || kinds[layer] != group.kind) __builtin_trap();
    }
    if (layer != kinds.size()) __builtin_trap();
  }
  return 0;
}
