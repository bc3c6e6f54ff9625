// File: module.h
// What every nn/ module shares: its path in the layer (mirroring Transformers' named_modules, e.g.
// "self_attn.q_proj"), and the layer's parameter list it registers its weights in.
//
// Not for: owning tensors beyond parameters. Modules are built once per census, inside its Session,
// and must not move afterwards (observers keep views of their paths).
#pragma once

#include <optional>
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

// While alive, parameters are made in the dtype their module names, where PEFT's
// prepare_model_for_kbit_training would widen bf16 ones: the packed 4-bit weights, and the adapters PEFT
// adds after it ran.
class ParametersKeepDtype {
 public:
  ParametersKeepDtype() : previous_(Session::current().bf16_parameter_dtype()) {
    Session::current().set_bf16_parameter_dtype(std::nullopt);
  }
  ~ParametersKeepDtype() { Session::current().set_bf16_parameter_dtype(previous_); }
  ParametersKeepDtype(const ParametersKeepDtype&) = delete;
  ParametersKeepDtype& operator=(const ParametersKeepDtype&) = delete;

 private:
  std::optional<DType> previous_;
};

inline std::string child_path(const std::string& parent, const char* name) {
  return parent.empty() ? std::string(name) : parent + "." + name;
}

}  // namespace census::nn
