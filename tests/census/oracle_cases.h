// The reference numbers of the dense families, copied from the torch-2 oracle's recorded runs
// (real Transformers 5 layers on PyTorch 2 fake tensors, hidden 256, 8 heads, 2 KV heads, head_dim 32,
// intermediate 512, vocab 4096) into tests/data/oracle/.
#pragma once

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include <sstream>

#include "models/python_json.h"
#include "models/registry.h"

namespace census::testing {

inline nlohmann::json oracle_case(const std::string& name) {
  std::ifstream file(std::string(CENSUS_TEST_DATA) + "/oracle/" + name + ".json");
  std::stringstream text;
  text << file.rdbuf();
  // The recorded configs are as Python's json writes them (time_step_limit [0.0, Infinity]).
  nlohmann::json json = parse_python_json(text.str());
  if (json.is_discarded()) throw std::runtime_error("oracle case " + name + " is not JSON");
  return json;
}

// The case's config.json. The oracle's second round records it as {built_by, model_type, class,
// fields} with the config class's fields under `fields`; the first round records the fields themselves.
inline ModelConfig oracle_config(const nlohmann::json& oracle) {
  const nlohmann::json& recorded = oracle.at("config");
  auto config = read_config(recorded.contains("fields") ? recorded.at("fields") : recorded);
  if (!config) throw std::runtime_error(config.refusal().message());
  return config.take();
}

// FLOPs by part: the second round records them under flops.flops, beside the backend that ran.
inline const nlohmann::json& oracle_flops(const nlohmann::json& oracle) {
  const nlohmann::json& flops = oracle.at("flops");
  return flops.contains("flops") ? flops.at("flops") : flops;
}

}  // namespace census::testing
