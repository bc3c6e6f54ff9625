// File: config_reader.h
// Reading a Transformers config.json: each field with its config class's default when absent (or
// null), refused in one line when present but of the wrong type or out of range. A value that is
// present and wrong is always refused, never read as absent.
#pragma once

#include <nlohmann/json.hpp>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace census {

// The most layers a config may state: per-layer kinds are built for every layer, so a count in the
// billions would hang a census before it refuses anything.
inline constexpr int64_t kLargestLayerCount = int64_t{1} << 20;

// How a per-layer list's length is held to the layer count, as the family's config class holds it:
// exactly (PreTrainedConfig.validate_layer_type), or cut to it, a longer list running with its first
// num_hidden_layers entries (DeepseekV4Config's layer_types and mlp_layer_types, SmolLM3's
// no_rope_layers, which it only indexes).
enum class PerLayer { kExact, kCut };

// The one check of a per-layer list or pattern's length: `stated` entries for `num_layers` layers
// (nullopt where the list states the count itself, as Nemotron-H's pattern does), refused where the
// length breaks `rule`, and past kLargestLayerCount entries whatever the rule.
Status check_per_layer(const std::string& field, int64_t stated, std::optional<int64_t> num_layers,
                       PerLayer rule = PerLayer::kExact);

// A config value as a refusal shows it: nested values only two levels deep, long ones cut, control
// characters escaped, NaN and infinities named; never more than one line, whatever the value's depth.
std::string shown(const nlohmann::json& value);

class ConfigReader {
 public:
  // `prefix` names the object read ("rope_parameters.") in a refusal; empty for the config itself.
  explicit ConfigReader(const nlohmann::json& json, std::string prefix = "") : json_(json), prefix_(std::move(prefix)) {}

  // A positive integer; `fallback` where absent or null (refused as missing if there is none).
  Result<int64_t> size(const char* name, std::optional<int64_t> fallback) const;
  // A non-negative integer (a count that may be zero, such as first_k_dense_replace).
  Result<int64_t> count(const char* name, int64_t fallback) const;
  // A list of layer indices, each in [0, num_layers), returned sorted and each once (a membership
  // test is then a binary search); empty where absent or null.
  Result<std::vector<int64_t>> layer_indices(const char* name, int64_t num_layers) const;
  // A per-layer list of names, each one of `kinds` (layer_types, mlp_layer_types, indexer_types), its
  // length held to num_layers by `rule` (check_per_layer); one name per layer, a cut list cut.
  Result<std::vector<std::string>> layer_kinds(const char* name, int64_t num_layers,
                                               std::initializer_list<std::string_view> kinds,
                                               PerLayer rule = PerLayer::kExact) const;
  // A per-layer list of 0 and 1 (no_rope_layers, MiMo's hybrid_layer_pattern and moe_layer_freq).
  Result<std::vector<bool>> layer_flags(const char* name, int64_t num_layers, PerLayer rule = PerLayer::kExact) const;
  // A finite positive number.
  Result<double> positive_number(const char* name, double fallback) const;
  // A dropout probability: a number in [0, 1).
  Result<double> probability(const char* name, double fallback) const;
  Result<bool> flag(const char* name, bool fallback) const;
  // A name (an activation, an implementation): a string without control characters, at most 256 long.
  Result<std::string> text(const char* name, const std::string& fallback) const;
  // A nested object (rope_parameters) to read fields of; nullopt where absent or null, refused where
  // present and not an object.
  Result<std::optional<ConfigReader>> section(const char* name) const;
  bool has(const char* name) const { return json_.contains(name) && !json_.at(name).is_null(); }
  const nlohmann::json& json() const { return json_; }

 private:
  Refusal wrong(const char* name, const std::string& advice) const { return refuse(prefix_ + name, advice); }

  const nlohmann::json& json_;
  std::string prefix_;
};

}  // namespace census
