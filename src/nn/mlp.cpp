#include "nn/mlp.h"

#include "ops/ops.h"

namespace census::nn {

Tensor Activation::forward(const Tensor& input) const {
  ModuleScope scope(path_, ModuleKind::kActivation);
  if (act_ == HiddenAct::kRelu2) return ops::pow(ops::relu(input), 2);
  return act_ == HiddenAct::kSilu ? ops::silu(input) : ops::gelu_tanh(input);
}

GatedMLP::GatedMLP(const std::string& path, int64_t hidden_size, int64_t intermediate_size, bool bias,
                   ParameterList& params, HiddenAct act, const char* activation_name, LigerMul liger)
    : path_(path),
      gate_proj(child_path(path, "gate_proj"), hidden_size, intermediate_size, bias, params),
      up_proj(child_path(path, "up_proj"), hidden_size, intermediate_size, bias, params),
      down_proj(child_path(path, "down_proj"), intermediate_size, hidden_size, bias, params),
      act_fn(child_path(path, activation_name), act),
      liger_(liger) {}

Tensor GatedMLP::forward(const Tensor& x) const {
  ModuleScope scope(path_, ModuleKind::kOther);
  if (liger_ != LigerMul::kNone) {
    Tensor gate = gate_proj.forward(x);
    Tensor up = up_proj.forward(x);
    Tensor c = liger_ == LigerMul::kGELU ? ops::liger_gelu_mul(gate, up) : ops::liger_silu_mul(gate, up);
    gate = Tensor();  // the call's arguments, gone as it returns
    up = Tensor();
    return down_proj.forward(c);
  }
  // Python evaluates gate before up: sequence numbers, and so the backward's order, depend on it.
  Tensor activated = act_fn.forward(gate_proj.forward(x));
  Tensor up = up_proj.forward(x);
  return down_proj.forward(ops::mul(activated, up));
}

}  // namespace census::nn
