// File: config_reader.h
// Reading a Transformers config.json: each field with its config class's default when absent (or
// null), refused in one line when present but of the wrong type or out of range.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "util/result.h"

namespace census {

class ConfigReader {
 public:
  explicit ConfigReader(const nlohmann::json& json) : json_(json) {}

  // A positive integer; `fallback` where absent or null (refused as missing if there is none).
  Result<int64_t> size(const char* name, std::optional<int64_t> fallback) const;
  // A non-negative integer (a count that may be zero, such as first_k_dense_replace).
  Result<int64_t> count(const char* name, int64_t fallback) const;
  // A list of layer indices, each in [0, num_layers); empty where absent or null.
  Result<std::vector<int64_t>> layer_indices(const char* name, int64_t num_layers) const;
  Result<double> positive_number(const char* name, double fallback) const;
  // A dropout probability: a number in [0, 1).
  Result<double> probability(const char* name, double fallback) const;
  Result<bool> flag(const char* name, bool fallback) const;
  Result<std::string> text(const char* name, const std::string& fallback) const;
  bool has(const char* name) const { return json_.contains(name) && !json_.at(name).is_null(); }
  const nlohmann::json& json() const { return json_; }

 private:
  const nlohmann::json& json_;
};

}  // namespace census
