// File: families.h
// The registry of model families by model_type, and reading a config.json into a ModelConfig.
#pragma once

#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "models/config.h"
#include "models/config_reader.h"

namespace census {

struct FamilyEntry {
  Family family;
  Result<ModelConfig> (*read)(const ConfigReader& reader);
};

std::span<const FamilyEntry> families();

// The ModelConfig of a parsed config.json (a composite config's text_config is read where present).
Result<ModelConfig> read_config(const nlohmann::json& json);
// The same, from a file path.
Result<ModelConfig> read_config_file(const std::string& path);

}  // namespace census
