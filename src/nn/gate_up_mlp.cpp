#include "nn/gate_up_mlp.h"

#include "ops/ops.h"

namespace census::nn {

GateUpMLP::GateUpMLP(const std::string& path, int64_t hidden_size, int64_t intermediate_size, ParameterList& params,
                     HiddenAct act, const char* activation_name)
    : path_(path),
      gate_up_proj(child_path(path, "gate_up_proj"), hidden_size, 2 * intermediate_size, /*bias=*/false, params),
      down_proj(child_path(path, "down_proj"), intermediate_size, hidden_size, /*bias=*/false, params),
      activation_fn(child_path(path, activation_name), act) {}

Tensor GateUpMLP::forward(const Tensor& hidden_states) const {
  ModuleScope scope(path_, ModuleKind::kOther);
  Tensor up_states = gate_up_proj.forward(hidden_states);
  std::vector<Tensor> halves = ops::chunk(up_states, 2, -1);
  const Tensor gate = halves[0];
  up_states = halves[1];
  halves.clear();
  // up_states * act(gate): the product's self is the up view, its other the activation.
  up_states = ops::mul(up_states, activation_fn.forward(gate));
  return down_proj.forward(up_states);
}

}  // namespace census::nn
