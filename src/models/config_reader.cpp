#include "models/config_reader.h"

namespace census {
namespace {

// Sizes beyond this cannot be priced: byte and FLOP counts must stay exact in 64-bit integers.
constexpr int64_t kLargestSize = int64_t{1} << 32;

std::string shown(const nlohmann::json& value) {
  std::string text = value.dump();
  return text.size() > 40 ? text.substr(0, 37) + "..." : text;
}

}  // namespace

Result<int64_t> ConfigReader::size(const char* name, std::optional<int64_t> fallback) const {
  if (!has(name)) {
    if (fallback) return *fallback;
    return refuse(name, "missing from the config; add it (a positive integer)");
  }
  const nlohmann::json& value = json_.at(name);
  if (!value.is_number_integer() && !(value.is_number_float() && value.get<double>() == static_cast<int64_t>(value.get<double>())))
    return refuse(name, "must be a positive integer, not " + shown(value) + "; fix the config");
  const int64_t n = value.is_number_integer() ? value.get<int64_t>() : static_cast<int64_t>(value.get<double>());
  if (n <= 0) return refuse(name, "must be a positive integer, not " + shown(value) + "; fix the config");
  if (n > kLargestSize)
    return refuse(name, std::to_string(n) + " is too large for exact 64-bit byte counts (at most 2^32); fix the config");
  return n;
}

Result<int64_t> ConfigReader::count(const char* name, int64_t fallback) const {
  if (!has(name)) return fallback;
  const nlohmann::json& value = json_.at(name);
  if (!value.is_number_integer() || value.get<int64_t>() < 0 || value.get<int64_t>() > kLargestSize)
    return refuse(name, "must be a non-negative integer, not " + shown(value) + "; fix the config");
  return value.get<int64_t>();
}

Result<std::vector<int64_t>> ConfigReader::layer_indices(const char* name, int64_t num_layers) const {
  std::vector<int64_t> out;
  if (!has(name)) return out;
  const nlohmann::json& value = json_.at(name);
  if (!value.is_array()) return refuse(name, "must be a list of layer indices, not " + shown(value) + "; fix the config");
  for (const nlohmann::json& entry : value) {
    if (!entry.is_number_integer() || entry.get<int64_t>() < 0 || entry.get<int64_t>() >= num_layers)
      return refuse(name, "has " + shown(entry) + ", not a layer index in [0, " + std::to_string(num_layers) +
                              "); fix the config");
    out.push_back(entry.get<int64_t>());
  }
  return out;
}

Result<double> ConfigReader::positive_number(const char* name, double fallback) const {
  if (!has(name)) return fallback;
  const nlohmann::json& value = json_.at(name);
  if (!value.is_number() || value.get<double>() <= 0)
    return refuse(name, "must be a positive number, not " + shown(value) + "; fix the config");
  return value.get<double>();
}

Result<double> ConfigReader::probability(const char* name, double fallback) const {
  if (!has(name)) return fallback;
  const nlohmann::json& value = json_.at(name);
  if (!value.is_number() || value.get<double>() < 0 || value.get<double>() >= 1)
    return refuse(name, "must be a probability in [0, 1), not " + shown(value) + "; fix the config");
  return value.get<double>();
}

Result<bool> ConfigReader::flag(const char* name, bool fallback) const {
  if (!has(name)) return fallback;
  const nlohmann::json& value = json_.at(name);
  if (!value.is_boolean()) return refuse(name, "must be true or false, not " + shown(value) + "; fix the config");
  return value.get<bool>();
}

Result<std::string> ConfigReader::text(const char* name, const std::string& fallback) const {
  if (!has(name)) return fallback;
  const nlohmann::json& value = json_.at(name);
  if (!value.is_string()) return refuse(name, "must be a string, not " + shown(value) + "; fix the config");
  return value.get<std::string>();
}

}  // namespace census
