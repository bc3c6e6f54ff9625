// File: registry.h
// The families Census prices, one per Transformers model_type (each defined by CENSUS_FAMILY in its
// own file in models/), and reading a config.json into a ModelConfig.
#pragma once

#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "models/config.h"

namespace census {

// Every family, sorted by model_type.
std::span<const Family* const> families();

// The ModelConfig of a parsed config.json (a composite config's text_config is read where present).
// An unknown model_type is refused, naming the known ones.
Result<ModelConfig> read_config(const nlohmann::json& json);
// The same, from a file path.
Result<ModelConfig> read_config_file(const std::string& path);

}  // namespace census
