#include <algorithm>
#include <vector>

#include "models/registry.h"
#include "util/escape.h"
#include "util/read_file.h"

#include "models/python_json.h"

namespace census {
namespace {

// How deep a config's values may nest: a config.json's nest two or three levels. A family that copies
// its fields (to lay its defaults under them) would copy a deeper value recursively, so one nested
// past this is refused before any family reads it. Walked iteratively: the check itself cannot overflow.
constexpr int kDeepestConfigValue = 64;

Status check_nesting(const nlohmann::json& fields) {
  for (const auto& [name, value] : fields.items()) {
    std::vector<std::pair<const nlohmann::json*, int>> pending{{&value, 1}};
    while (!pending.empty()) {
      const auto [each, depth] = pending.back();
      pending.pop_back();
      if (depth > kDeepestConfigValue)
        return refuse(name, "nests values more than 64 levels deep; a config.json's values nest two or three, fix the config");
      if (each->is_structured())
        for (const auto& item : *each) pending.emplace_back(&item, depth + 1);
    }
  }
  return {};
}

// Fields no census prices (the attention's window and chunk, the positions a model was trained for):
// they move no memory, yet a config class types them, so a string or a list there is a broken config,
// refused as any other: null or a whole number from 0 to 2^32, at the top level and in the rotary's
// parameters (rope_scaling, rope_parameters, and each object those nest: one per layer type, say).
Status check_unpriced_fields(const ConfigReader& config) {
  constexpr const char* kFields[] = {"sliding_window", "attention_chunk_size", "max_position_embeddings",
                                     "original_max_position_embeddings"};
  std::vector<ConfigReader> readers{config};
  for (const char* section : {"rope_scaling", "rope_parameters"}) {
    CENSUS_ASSIGN(const std::optional<ConfigReader> rope, config.section(section));
    if (!rope) continue;
    readers.push_back(*rope);
    for (const auto& [name, value] : rope->json().items())
      if (value.is_object()) readers.emplace_back(value, std::string(section) + "." + name + ".");
  }
  for (const ConfigReader& reader : readers)
    for (const char* field : kFields) CENSUS_TRY(reader.count(field, 0));
  return {};
}

}  // namespace

Result<ModelConfig> read_config(const nlohmann::json& json) {
  if (!json.is_object()) return refuse("config", "is not a JSON object; give a Transformers config.json");
  const nlohmann::json* fields = &json;
  // A multimodal model's config holds its language model's under text_config.
  if (json.contains("text_config") && !json.at("text_config").is_null()) {
    if (!json.at("text_config").is_object())
      return refuse("text_config", "must be an object (the language model's config), not " + shown(json.at("text_config")) +
                                       "; fix the config");
    fields = &json.at("text_config");
  }
  if (!fields->contains("model_type") || fields->at("model_type").is_null())
    return refuse("model_type", "missing from the config; add the Transformers model_type (e.g. \"llama\")");
  if (!fields->at("model_type").is_string())
    return refuse("model_type", "must be a string, not " + shown(fields->at("model_type")) +
                                    "; give the Transformers model_type (e.g. \"llama\")");
  CENSUS_TRY(check_nesting(*fields));
  const ConfigReader reader(*fields);
  CENSUS_TRY(check_unpriced_fields(reader));
  // Every family builds per-layer kinds: refuse a layer count no census could build before any family does.
  auto layers = reader.size("num_hidden_layers", 1);
  CENSUS_TRY(layers);
  if (*layers > kLargestLayerCount)
    return refuse("num_hidden_layers", std::to_string(*layers) +
                                           " layers are more than a census prices (at most 2^20 = 1048576); fix the config");
  const std::string& model_type = fields->at("model_type").get_ref<const std::string&>();
  const Family* family = nullptr;
  std::string known;
  for (const Family* each : families()) {
    if (model_type == each->model_type) family = each;
    known += known.empty() ? "" : ", ";
    known += each->model_type;
  }
  if (family == nullptr) return refuse("model_type", echoed(model_type) + " is not priced by this Census; known: " + known);
  auto config = family->read(reader);
  CENSUS_TRY(config);
  // A composite model (one built around its text_config) ties its head by its own config's value.
  const bool composite = fields != &json;
  auto tied = ConfigReader(json).flag("tie_word_embeddings", composite ? family->composite_ties_word_embeddings
                                                                       : family->ties_word_embeddings);
  CENSUS_TRY(tied);
  config->tie_word_embeddings = *tied;
  // A MoE ForCausalLM adds the load-balancing loss over every layer's router logits where this is set.
  auto router_logits = reader.flag("output_router_logits", false);
  CENSUS_TRY(router_logits);
  config->output_router_logits = *router_logits;
  return config;
}

Result<ModelConfig> read_config_file(const std::string& path) {
  auto text = read_regular_file(path, "give the path of a config.json or a shipped model name (census models)");
  CENSUS_TRY(text);
  nlohmann::json json = parse_python_json(*text);
  if (json.is_discarded()) return refuse(path, "is not valid JSON; give a Transformers config.json");
  return read_config(json);
}

}  // namespace census
