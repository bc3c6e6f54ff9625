#include "cli/stack_file.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>

namespace census::cli {
namespace {

Result<LayerGroup> read_group(const YAML::Node& node, size_t index) {
  const std::string where = "--layers group " + std::to_string(index);
  if (!node.IsMap()) return refuse(where, "is not a mapping; give {kind, count, mtp}");
  for (const auto& entry : node) {
    const std::string key = entry.first.as<std::string>();
    if (key != "kind" && key != "count" && key != "mtp")
      return refuse(where, "has the unknown key '" + key + "'; a group has kind, count and mtp");
  }
  if (!node["kind"] || !node["kind"].IsScalar()) return refuse(where, "lacks its kind");
  if (!node["count"] || !node["count"].IsScalar()) return refuse(where, "lacks its count");
  LayerGroup group;
  group.kind = node["kind"].as<std::string>();
  int64_t count = 0;
  if (!YAML::convert<int64_t>::decode(node["count"], count) || count <= 0)
    return refuse(where, "count must be a positive integer, not '" + node["count"].as<std::string>() + "'");
  group.count = count;
  if (node["mtp"]) {
    bool mtp = false;
    if (!YAML::convert<bool>::decode(node["mtp"], mtp)) return refuse(where, "mtp must be true or false");
    group.mtp = mtp;
  }
  return group;
}

}  // namespace

Result<std::vector<LayerGroup>> read_stack_file(const std::string& path, const ModelConfig& config) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    return refuse(path, "cannot be read; give a JSON or YAML list of {kind, count, mtp} groups");
  } catch (const YAML::Exception& e) {
    return refuse(path, "is not valid JSON or YAML (line " + std::to_string(e.mark.line + 1) + "); fix the file");
  }
  if (root.IsMap() && root["layers"]) root = root["layers"];
  if (!root.IsSequence() || root.size() == 0)
    return refuse(path, "must list the stack's groups, {kind, count, mtp} each, in model order");
  std::vector<LayerGroup> groups;
  for (size_t i = 0; i < root.size(); ++i) {
    auto group = read_group(root[i], i);
    CENSUS_TRY(group);
    if (!group->mtp && !groups.empty() && groups.back().mtp)
      return refuse("--layers group " + std::to_string(i), "comes after an MTP group; MTP groups come last");
    groups.push_back(group.take());
  }
  int64_t body = 0;
  for (const LayerGroup& group : groups) body += group.mtp ? 0 : group.count;
  if (body != config.num_hidden_layers)
    return refuse("--layers", "its groups count " + std::to_string(body) + " layers, the model has " +
                                  std::to_string(config.num_hidden_layers) + " (num_hidden_layers); fix the counts");
  std::vector<std::string> kinds;
  for (const LayerGroup& group : layer_stack(config)) kinds.push_back(group.kind);
  for (const LayerGroup& group : groups) {
    if (std::find(kinds.begin(), kinds.end(), group.kind) != kinds.end()) continue;
    std::string known;
    for (const std::string& kind : kinds) known += (known.empty() ? "" : ", ") + kind;
    return refuse("--layers", "kind '" + group.kind + "' is not a layer kind of this " + config.model_type +
                                  " model (it has: " + known + ")");
  }
  return groups;
}

}  // namespace census::cli
