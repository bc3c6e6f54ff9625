// File: yaml_fields.h
// A trainer's YAML file as its readers ask it (run/torchtune_yaml.cpp, run/trl_yaml.cpp): a field's node,
// whether the file gives it, and its value as a flag, a whole number, a number or a text, each refusal one
// line naming the file and the field.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "util/result.h"

namespace census {

class YamlFields {
 public:
  YamlFields(std::string path, YAML::Node root) : path_(std::move(path)), root_(std::move(root)) {}

  // "FILE: KEY: why".
  Refusal refused(std::string_view key, const std::string& why) const;
  // A top-level key's node, or an undefined node where the file leaves it out.
  YAML::Node at(const std::string& key) const;
  // Given, and not null.
  bool given(const std::string& key) const;

  // A field's value, or `left_out` (none) where the file leaves it out or gives null. `key` names it in a
  // refusal; the _of forms read a node the reader found (a section's key).
  Result<bool> flag(const std::string& key, bool left_out) const { return flag_of(at(key), key, left_out); }
  Result<bool> flag_of(const YAML::Node& node, std::string_view key, bool left_out) const;
  Result<std::optional<int64_t>> integer(const std::string& key) const { return integer_of(at(key), key); }
  Result<std::optional<int64_t>> integer_of(const YAML::Node& node, std::string_view key) const;
  Result<std::optional<double>> number(const std::string& key) const;
  Result<std::string> text(const std::string& key) const { return text_of(at(key), key); }
  Result<std::string> text_of(const YAML::Node& node, std::string_view key) const;  // empty: left out

 private:
  std::string path_;
  YAML::Node root_;
};

}  // namespace census
