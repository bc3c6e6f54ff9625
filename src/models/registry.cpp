#include <algorithm>
#include <fstream>
#include <sstream>

#include "models/registry.h"

namespace census {

Result<ModelConfig> read_config(const nlohmann::json& json) {
  if (!json.is_object()) return refuse("config", "is not a JSON object; give a Transformers config.json");
  const nlohmann::json* fields = &json;
  // A multimodal model's config holds its language model's under text_config.
  if (json.contains("text_config") && json.at("text_config").is_object()) fields = &json.at("text_config");
  if (!fields->contains("model_type") || !fields->at("model_type").is_string())
    return refuse("model_type", "missing from the config; add the Transformers model_type (e.g. \"llama\")");
  const std::string model_type = fields->at("model_type").get<std::string>();
  std::string known;
  for (const Family* family : families()) {
    if (model_type == family->model_type) return family->read(ConfigReader(*fields));
    known += known.empty() ? "" : ", ";
    known += family->model_type;
  }
  return refuse("model_type", "'" + model_type + "' is not priced by this Census; known: " + known);
}

Result<ModelConfig> read_config_file(const std::string& path) {
  std::ifstream file(path);
  if (!file) return refuse(path, "cannot be read; give the path of a config.json or a shipped model name (census models)");
  std::stringstream text;
  text << file.rdbuf();
  nlohmann::json json = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return refuse(path, "is not valid JSON; give a Transformers config.json");
  return read_config(json);
}

}  // namespace census
