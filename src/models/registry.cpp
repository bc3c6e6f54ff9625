#include <algorithm>

#include "models/families.h"
#include "util/escape.h"
#include "util/read_file.h"

namespace census {

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
  const ConfigReader reader(*fields);
  // Every family builds per-layer kinds: refuse a layer count no census could build before any family does.
  auto layers = reader.size("num_hidden_layers", 1);
  CENSUS_TRY(layers);
  if (*layers > kLargestLayerCount)
    return refuse("num_hidden_layers", std::to_string(*layers) +
                                           " layers are more than a census prices (at most 2^20 = 1048576); fix the config");
  const std::string& model_type = fields->at("model_type").get_ref<const std::string&>();
  std::string known;
  for (const FamilyEntry& entry : families()) {
    if (model_type == entry.family.model_type) return entry.read(reader);
    known += known.empty() ? "" : ", ";
    known += entry.family.model_type;
  }
  return refuse("model_type", echoed(model_type) + " is not priced by this Census; known: " + known);
}

Result<ModelConfig> read_config_file(const std::string& path) {
  auto text = read_regular_file(path, "give the path of a config.json or a shipped model name (census models)");
  CENSUS_TRY(text);
  nlohmann::json json = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return refuse(path, "is not valid JSON; give a Transformers config.json");
  return read_config(json);
}

std::vector<std::string> layer_kinds(const ModelConfig& config) {
  const int64_t layers = config.num_hidden_layers;
  std::vector<bool> moe(static_cast<size_t>(layers));
  for (int64_t i = 0; i < layers; ++i) moe[static_cast<size_t>(i)] = is_moe_layer(config, i);
  const bool uniform_ffn = std::all_of(moe.begin(), moe.end(), [&](bool each) { return each == moe.front(); });
  const std::vector<std::string>& types = config.layer_types;
  const bool uniform_attention =
      std::all_of(types.begin(), types.end(), [&](const std::string& type) { return type == types.front(); });
  std::vector<std::string> kinds;
  kinds.reserve(static_cast<size_t>(layers));
  for (size_t i = 0; i < static_cast<size_t>(layers); ++i) {
    const char* ffn = moe[i] ? "moe" : "dense";
    if (uniform_attention && uniform_ffn) kinds.emplace_back("decoder");
    else if (uniform_attention) kinds.emplace_back(ffn);
    else if (uniform_ffn) kinds.push_back(types[i]);
    else kinds.push_back(types[i] + "_" + ffn);
  }
  return kinds;
}

std::string layer_kind(const ModelConfig& config, int64_t index) {
  return layer_kinds(config)[static_cast<size_t>(index)];
}

std::vector<LayerGroup> layer_stack(const ModelConfig& config) {
  std::vector<LayerGroup> groups;
  for (std::string& kind : layer_kinds(config)) {
    if (!groups.empty() && groups.back().kind == kind) ++groups.back().count;
    else groups.push_back({std::move(kind), 1});
  }
  // Multi-token-prediction layers repeat the last body kind, stacked after it.
  if (config.num_mtp_layers > 0 && !groups.empty()) groups.push_back({groups.back().kind, config.num_mtp_layers, true});
  return groups;
}

ModelConfig tp_config(const ModelConfig& config, int64_t tp) {
  ModelConfig out = config;
  auto divide = [tp](int64_t value) { return std::max<int64_t>(1, value / tp); };
  out.num_attention_heads = divide(config.num_attention_heads);
  out.num_key_value_heads = divide(config.num_key_value_heads);
  out.intermediate_size = divide(config.intermediate_size);
  // The experts' and shared experts' widths; the number of experts is expert parallelism's to divide.
  if (config.moe.moe_intermediate_size > 0) out.moe.moe_intermediate_size = divide(config.moe.moe_intermediate_size);
  if (config.moe.shared_expert_intermediate_size > 0)
    out.moe.shared_expert_intermediate_size = divide(config.moe.shared_expert_intermediate_size);
  if (config.linear_num_key_heads > 0) out.linear_num_key_heads = divide(config.linear_num_key_heads);
  if (config.linear_num_value_heads > 0) out.linear_num_value_heads = divide(config.linear_num_value_heads);
  return out;
}

}  // namespace census
