// File: shipped_models.h
// The model configs shipped inside the census binary (configs/*.json at build time), by name.
#pragma once

#include <span>
#include <string_view>

namespace census::cli {

struct ShippedModel {
  std::string_view name;  // lower-case public id, e.g. "llama-3.1-8b"
  std::string_view json;  // its config.json as published
};

std::span<const ShippedModel> shipped_models();

}  // namespace census::cli
