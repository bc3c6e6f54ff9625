// File: yaml_text.h
// Parsing a stack file's or a recipe's text with yaml-cpp, so that a quote left open is an error.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>

namespace census {

// The document of `text`; throws YAML::Exception where it is not valid YAML. yaml-cpp (0.7) closes a
// quoted scalar left open at the end of the text when a line break follows it, which would read
// `match: "*.mlp` and every line after it as one string; without the trailing whitespace, that open
// quote is the error it is. Trailing whitespace changes no document a stack or recipe can state.
inline YAML::Node load_yaml(const std::string& text) {
  const size_t end = text.find_last_not_of(" \t\r\n");
  return YAML::Load(end == std::string::npos ? std::string() : text.substr(0, end + 1));
}

}  // namespace census
