#include "run/yaml_fields.h"

#include "util/escape.h"

namespace census {

Refusal YamlFields::refused(std::string_view key, const std::string& why) const {
  return refuse(path_ + ": " + std::string(key), why);
}

YAML::Node YamlFields::at(const std::string& key) const {
  const YAML::Node node = root_[key];  // a missing key's node is invalid: asking its type would throw
  return node.IsDefined() ? node : YAML::Node(YAML::NodeType::Undefined);
}

bool YamlFields::given(const std::string& key) const {
  const YAML::Node node = root_[key];
  return node.IsDefined() && !node.IsNull();
}

Result<bool> YamlFields::flag_of(const YAML::Node& node, std::string_view key, bool left_out) const {
  if (!node.IsDefined() || node.IsNull()) return left_out;
  bool value = false;
  if (!node.IsScalar() || !YAML::convert<bool>::decode(node, value)) return refused(key, "must be true or false");
  return value;
}

Result<std::optional<int64_t>> YamlFields::integer_of(const YAML::Node& node, std::string_view key) const {
  if (!node.IsDefined() || node.IsNull()) return std::optional<int64_t>();
  int64_t value = 0;
  if (!node.IsScalar() || !YAML::convert<int64_t>::decode(node, value))
    return refused(key, "must be a whole number, not " + echoed(node.IsScalar() ? node.Scalar() : "a list or mapping"));
  return std::optional<int64_t>(value);
}

Result<std::optional<double>> YamlFields::number(const std::string& key) const {
  const YAML::Node node = at(key);
  if (!node.IsDefined() || node.IsNull()) return std::optional<double>();
  double value = 0;
  if (!node.IsScalar() || !YAML::convert<double>::decode(node, value))
    return refused(key, "must be a number, not " + echoed(node.IsScalar() ? node.Scalar() : "a list or mapping"));
  return std::optional<double>(value);
}

Result<std::string> YamlFields::text_of(const YAML::Node& node, std::string_view key) const {
  if (!node.IsDefined() || node.IsNull()) return std::string();
  if (!node.IsScalar()) return refused(key, "must be a string");
  return node.Scalar();
}

}  // namespace census
