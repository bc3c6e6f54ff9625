#include "cli/train_yaml.h"

#include <yaml-cpp/yaml.h>

#include "run/yaml_text.h"
#include "util/escape.h"
#include "util/read_file.h"

namespace census::cli {
namespace {

std::string known_factories() {
  return "replace_qwen3_moe_rms_norm, replace_qwen3_moe_flash_attention, replace_qwen3_moe_grouped_experts, "
         "replace_deepseek_v32_rms_norm, replace_deepseek_v32_grouped_experts";
}

Result<std::optional<ReplacementSpec>> read_entry(const YAML::Node& entry, size_t i) {
  const std::string where = "plan_overrides[" + std::to_string(i) + "]";
  if (!entry.IsMap()) return refuse(where, "is not a mapping; fix the train.yaml");
  // A conditional entry (when: cp, when: ep) wraps for a parallelism the census does not run.
  if (!entry["replace_module"] || entry["when"]) return std::optional<ReplacementSpec>();
  ReplacementSpec spec;
  const YAML::Node& factory = entry["replace_module"];
  if (factory.IsScalar()) {
    spec.factory = factory.as<std::string>();
  } else if (factory.IsMap() && factory["_target_"] && factory["_target_"].IsScalar()) {
    spec.factory = factory["_target_"].as<std::string>();
  } else {
    return refuse(where, "replace_module must be a factory path or {_target_: factory path}");
  }
  if (!entry["module_type"] || !entry["module_type"].IsScalar())
    return refuse(where, "states replace_module without module_type; add the Transformers class it replaces");
  spec.module_type = entry["module_type"].as<std::string>();
  const YAML::Node& match = entry["match"];
  if (match && match.IsScalar()) {
    spec.match.push_back(match.as<std::string>());
  } else if (match && match.IsSequence() && match.size() > 0) {
    for (const YAML::Node& pattern : match) {
      if (!pattern.IsScalar()) return refuse(where, "match lists a pattern that is not a string");
      spec.match.push_back(pattern.as<std::string>());
    }
  } else {
    return refuse(where, "match must be a string or a list of strings (module-name patterns)");
  }
  std::string why;
  const std::optional<FusedModule> module = known_factory(spec.factory, why);
  if (!module)
    return refuse(where, "factory " + echoed(spec.factory) + (why.empty() ? " is not known to the census (it prices: " +
                                                                       known_factories() + ")"
                                                                 : " " + why) +
                             "; the census never guesses a module it has not modelled");
  spec.module = *module;
  return std::optional<ReplacementSpec>(std::move(spec));
}

}  // namespace

Result<std::vector<ReplacementSpec>> read_train_yaml(const std::string& path) {
  auto text = read_regular_file(path, "give a HyperParallel train.yaml");
  CENSUS_TRY(text);
  return read_train_yaml_text(*text, path);
}

Result<std::vector<ReplacementSpec>> read_train_yaml_text(const std::string& text, const std::string& path) {
  YAML::Node root;
  try {
    root = load_yaml(text);
  } catch (const YAML::Exception& e) {
    return refuse(path, "is not valid YAML (line " + std::to_string(e.mark.line + 1) + "); fix the file");
  }
  if (!root.IsMap()) return refuse(path, "is not a train.yaml (a mapping with plan_overrides)");
  const YAML::Node overrides = root["plan_overrides"];
  std::vector<ReplacementSpec> specs;
  if (!overrides) return specs;
  if (!overrides.IsSequence()) return refuse(path, "plan_overrides must be a list of entries");
  for (size_t i = 0; i < overrides.size(); ++i) {
    auto spec = read_entry(overrides[i], i);
    CENSUS_TRY(spec);
    if (*spec) specs.push_back(std::move(**spec));
  }
  return specs;
}

}  // namespace census::cli
