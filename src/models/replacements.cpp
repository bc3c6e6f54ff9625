#include "models/replacements.h"

namespace census {
namespace {

struct KnownFactory {
  std::string_view path;
  FusedModule module;
};

// HyperParallel's public recipes' factories, and the fused module each builds.
constexpr KnownFactory kFactories[] = {
    {"hyper_parallel.models.qwen3_moe.adapter.replacements.replace_qwen3_moe_rms_norm", FusedModule::kRmsNorm},
    {"hyper_parallel.models.qwen3_moe.adapter.replacements.replace_qwen3_moe_flash_attention",
     FusedModule::kGqaFlashAttention},
    {"hyper_parallel.models.qwen3_moe.adapter.replacements.replace_qwen3_moe_grouped_experts",
     FusedModule::kGroupedExperts},
    {"hyper_parallel.models.deepseek_v32.adapter.conversion.module_replacement.replace_deepseek_v32_rms_norm",
     FusedModule::kRmsNorm},
    {"hyper_parallel.models.deepseek_v32.adapter.conversion.module_replacement.replace_deepseek_v32_grouped_experts",
     FusedModule::kGroupedExperts},
};

std::string_view last_component(std::string_view dotted) {
  const size_t dot = dotted.rfind('.');
  return dot == std::string_view::npos ? dotted : dotted.substr(dot + 1);
}

}  // namespace

bool fnmatch(std::string_view name, std::string_view pattern) {
  // Iterative glob with backtracking to the last '*'.
  size_t n = 0, p = 0, star = std::string_view::npos, mark = 0;
  while (n < name.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == name[n])) {
      ++n;
      ++p;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = n;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      n = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

std::optional<FusedModule> known_factory(std::string_view factory, std::string& why) {
  for (const KnownFactory& known : kFactories)
    if (known.path == factory) return known.module;
  if (factory.find("dsa_attention") != std::string_view::npos)
    why = "builds DeepSeek-V3.2's DSA attention, whose indexer needs a native extension the census does not model";
  return std::nullopt;
}

std::optional<FusedModule> replacement_for(const std::vector<ReplacementSpec>& specs, std::string_view fqn,
                                           std::string_view class_name) {
  for (const ReplacementSpec& spec : specs) {
    if (last_component(spec.module_type) != class_name) continue;
    for (const std::string& pattern : spec.match)
      if (fnmatch(fqn, pattern)) return spec.module;
  }
  return std::nullopt;
}

}  // namespace census
