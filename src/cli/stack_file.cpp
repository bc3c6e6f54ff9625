#include "cli/stack_file.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>

#include "run/yaml_text.h"
#include "util/checked.h"
#include "util/escape.h"
#include "util/read_file.h"

namespace census::cli {
namespace {

constexpr const char* kAdvice = "give a JSON or YAML list of {kind, count, mtp} groups";

Result<LayerGroup> read_group(const YAML::Node& node, size_t index) {
  const std::string where = "--layers group " + std::to_string(index);
  if (!node.IsMap()) return refuse(where, "is not a mapping; give {kind, count, mtp}");
  // Each key once, and only these three: a key stated twice would leave one of its values unread.
  int kind_keys = 0, count_keys = 0, mtp_keys = 0;
  for (const auto& entry : node) {
    if (!entry.first.IsScalar()) return refuse(where, "has a key that is a list or mapping; a group has kind, count and mtp");
    const std::string& key = entry.first.Scalar();
    if (key == "kind") ++kind_keys;
    else if (key == "count") ++count_keys;
    else if (key == "mtp") ++mtp_keys;
    else return refuse(where, "has the unknown key " + echoed(key) + "; a group has kind, count and mtp");
  }
  if (kind_keys > 1 || count_keys > 1 || mtp_keys > 1)
    return refuse(where, "states a key twice; give each of kind, count and mtp once");
  if (!node["kind"] || !node["kind"].IsScalar()) return refuse(where, "lacks its kind");
  if (!node["count"] || !node["count"].IsScalar()) return refuse(where, "lacks its count");
  LayerGroup group;
  group.kind = node["kind"].Scalar();
  int64_t count = 0;
  if (!YAML::convert<int64_t>::decode(node["count"], count) || count <= 0)
    return refuse(where, "count must be a positive integer, not " + echoed(node["count"].Scalar()));
  group.count = count;
  if (node["mtp"]) {
    bool mtp = false;
    if (!node["mtp"].IsScalar() || !YAML::convert<bool>::decode(node["mtp"], mtp))
      return refuse(where, "mtp must be true or false");
    group.mtp = mtp;
  }
  return group;
}

// The model's body groups as a refusal lists them ("dense x3, moe x58"), the first eight of them.
std::string kinds_of(const std::vector<LayerGroup>& stack) {
  std::string out;
  size_t shown = 0;
  for (const LayerGroup& group : stack) {
    if (group.mtp) continue;
    if (++shown > 8) return out + ", ...";
    out += (out.empty() ? "" : ", ") + group.kind + " x" + std::to_string(group.count);
  }
  return out;
}

// The body groups checked against the model's own stack, layer by layer: a group may split one of
// the model's runs, never cross into a run of another kind.
Status check_order(const std::vector<LayerGroup>& groups, const ModelConfig& config) {
  const std::vector<LayerGroup> model = layer_stack(config);
  size_t run = 0;
  int64_t left = model.empty() ? 0 : model.front().count;  // layers of model[run] not yet matched
  int64_t layer = 0;
  for (size_t i = 0; i < groups.size(); ++i) {
    const LayerGroup& group = groups[i];
    if (group.mtp) continue;
    for (int64_t remaining = group.count; remaining > 0;) {
      if (left == 0 && run + 1 < model.size() && !model[run + 1].mtp) left = model[++run].count;
      if (left == 0 || model[run].mtp) break;  // past the model's layers: the count check refuses it
      if (model[run].kind != group.kind)
        return refuse("--layers group " + std::to_string(i),
                      "states " + echoed(group.kind) + " at layer " + std::to_string(layer) + ", where this " +
                          config.model_type + " model has " + model[run].kind +
                          "; list the groups in model order (" + kinds_of(model) + ")");
      const int64_t taken = std::min(remaining, left);
      remaining -= taken;
      left -= taken;
      layer += taken;
    }
  }
  return {};
}

}  // namespace

Result<std::vector<LayerGroup>> read_stack_file(const std::string& path, const ModelConfig& config) {
  auto text = read_regular_file(path, kAdvice);
  CENSUS_TRY(text);
  return read_stack_text(*text, path, config);
}

Result<std::vector<LayerGroup>> read_stack_text(const std::string& text, const std::string& path,
                                                const ModelConfig& config) {
  YAML::Node root;
  try {
    root = load_yaml(text);
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
  Checked body = 0;
  for (const LayerGroup& group : groups) body = body + (group.mtp ? 0 : group.count);
  if (body.overflows() || body.value() != config.num_hidden_layers)
    return refuse("--layers", "its groups count " + (body.overflows() ? "more than 2^63" : std::to_string(body.value())) +
                                  " layers, the model has " + std::to_string(config.num_hidden_layers) +
                                  " (num_hidden_layers); fix the counts");
  std::vector<std::string> kinds;
  for (const LayerGroup& group : layer_stack(config)) kinds.push_back(group.kind);
  for (const LayerGroup& group : groups) {
    if (std::find(kinds.begin(), kinds.end(), group.kind) != kinds.end()) continue;
    std::string known;
    for (const std::string& kind : kinds) known += (known.empty() ? "" : ", ") + kind;
    return refuse("--layers", "kind " + echoed(group.kind) + " is not a layer kind of this " + config.model_type +
                                  " model (it has: " + known + ")");
  }
  CENSUS_TRY(check_order(groups, config));
  return groups;
}

}  // namespace census::cli
