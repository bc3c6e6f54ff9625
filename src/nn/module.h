// File: module.h
// What every nn/ module shares: its path in the layer (mirroring Transformers' named_modules, e.g.
// "self_attn.q_proj"), and the layer's parameter list it registers its weights in.
//
// Not for: owning tensors beyond parameters. Modules are built once per census, inside its Session,
// and must not move afterwards (observers keep views of their paths).
#pragma once

#include <string>
#include <vector>

#include "ops/dispatch.h"

namespace census::nn {

// A layer's parameters in registration order, as named_parameters() lists them.
using ParameterList = std::vector<Tensor>;

inline Tensor register_parameter(ParameterList& list, const std::string& module_path, const char* name,
                                 const Dims& sizes, DType dtype = DType::kBFloat16) {
  list.push_back(make_parameter(sizes, module_path + "." + name, dtype));
  return list.back();
}

inline std::string child_path(const std::string& parent, const char* name) {
  return parent.empty() ? std::string(name) : parent + "." + name;
}

}  // namespace census::nn
