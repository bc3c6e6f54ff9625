// File: replacements.h
// Module replacements: a train.yaml's plan_overrides entries that swap Transformers' modules for
// HyperParallel's fused ones (replace_module), as the census installs them in the layer it builds.
// An entry selects the modules whose fully qualified name ("model.layers.3.input_layernorm",
// "model.norm") one of its `match` patterns fits (fnmatch) and whose class is its module_type.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace census {

// The fused module a known factory builds (nn/hyperparallel.h).
enum class FusedModule : uint8_t { kRmsNorm, kGqaFlashAttention, kGroupedExperts };

struct ReplacementSpec {
  std::vector<std::string> match;  // fnmatch patterns on module names
  std::string module_type;         // the Transformers class, as a dotted path
  std::string factory;             // the factory's dotted path
  FusedModule module;
};

// The fused module that replaces the module named `fqn`, of Transformers class `class_name`, if a
// spec selects it.
std::optional<FusedModule> replacement_for(const std::vector<ReplacementSpec>& specs, std::string_view fqn,
                                           std::string_view class_name);

// The fused module a factory builds; nullopt for a factory the census does not know, with the reason
// in `why` where it knows one (a factory whose module it cannot price).
std::optional<FusedModule> known_factory(std::string_view factory, std::string& why);

// Python's fnmatch.fnmatchcase: '*' any run of characters (dots included), '?' one character.
bool fnmatch(std::string_view name, std::string_view pattern);

}  // namespace census
