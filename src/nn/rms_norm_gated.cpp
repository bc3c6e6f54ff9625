#include "nn/rms_norm_gated.h"

#include "ops/ops.h"

namespace census::nn {

RMSNormGated::RMSNormGated(std::string path, int64_t dim, double eps, ParameterList& params)
    : path_(std::move(path)), variance_epsilon_(eps) {
  weight_ = register_parameter(params, path_, "weight", Dims{dim});
}

Tensor RMSNormGated::forward(const Tensor& input, const Tensor& gate) const {
  ModuleScope scope(path_, ModuleKind::kNorm);
  const DType input_dtype = input.dtype();
  Tensor hidden_states = ops::to(input, DType::kFloat32);
  Tensor variance = ops::mean(ops::pow(hidden_states, 2), -1, /*keepdim=*/true);
  hidden_states = ops::mul(hidden_states, ops::rsqrt(ops::add(variance, variance_epsilon_)));
  hidden_states = ops::mul(weight_, ops::to(hidden_states, input_dtype));
  // ACT2FN["silu"] is called here as a function, not as a child module: its saves are the norm's.
  Tensor gated = ops::silu(ops::to(gate, DType::kFloat32));
  hidden_states = ops::mul(hidden_states, gated);
  return ops::to(hidden_states, input_dtype);
}

}  // namespace census::nn
