// The reference numbers of the dense families, copied from the torch-2 oracle's recorded runs
// (real Transformers 5 layers on PyTorch 2 fake tensors, hidden 256, 8 heads, 2 KV heads, head_dim 32,
// intermediate 512, vocab 4096) into tests/data/oracle/.
#pragma once

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "models/registry.h"

namespace census::testing {

inline nlohmann::json oracle_case(const std::string& name) {
  std::ifstream file(std::string(CENSUS_TEST_DATA) + "/oracle/" + name + ".json");
  return nlohmann::json::parse(file);
}

inline ModelConfig oracle_config(const nlohmann::json& oracle) {
  auto config = read_config(oracle.at("config"));
  if (!config) throw std::runtime_error(config.refusal().message());
  return config.take();
}

}  // namespace census::testing
