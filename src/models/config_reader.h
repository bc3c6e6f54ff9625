// File: config_reader.h
// Reading a Transformers config.json: each field with its config class's default when absent (or
// null), refused in one line when present but of the wrong type or out of range.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "util/result.h"

namespace census {

class ConfigReader {
 public:
  explicit ConfigReader(const nlohmann::json& json) : json_(json) {}

  // A positive integer; `fallback` where absent or null (refused as missing if there is none).
  Result<int64_t> size(const char* name, std::optional<int64_t> fallback) const;
  Result<double> positive_number(const char* name, double fallback) const;
  Result<bool> flag(const char* name, bool fallback) const;
  Result<std::string> text(const char* name, const std::string& fallback) const;
  bool has(const char* name) const { return json_.contains(name) && !json_.at(name).is_null(); }
  const nlohmann::json& json() const { return json_; }

 private:
  const nlohmann::json& json_;
};

}  // namespace census
