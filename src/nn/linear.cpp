#include "nn/linear.h"

#include "nn/float8_training.h"
#include "nn/tensor_parallel.h"
#include "ops/ops.h"

namespace census::nn {

Linear::Linear(std::string path, int64_t in_features, int64_t out_features, bool bias, ParameterList& params,
               DType dtype)
    : path_(std::move(path)) {
  weight_ = register_parameter(params, path_, "weight", Dims{out_features, in_features}, dtype);
  if (bias) bias_ = register_parameter(params, path_, "bias", Dims{out_features}, dtype);
  if (lora_adapts(path_)) lora_ = make_lora_adapter(path_, in_features, out_features, params);
}

Tensor Linear::forward(const Tensor& input) const {
  ModuleScope scope(path_, ModuleKind::kOther);
  if (const ParallelStyles* styles = parallel_styles()) return styles->linear(path_, input, weight_, bias_);
  const Tensor result = linear(input, weight_, bias_);
  return lora_ ? lora_forward(input, result, *lora_, weight_) : result;
}

Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  if (const std::optional<ops::Float8Recipe> recipe = float8_recipe(); recipe && float8_converts(weight))
    return ops::float8_linear(input, weight, bias, *recipe);
  return ops::linear(input, weight, bias);
}

}  // namespace census::nn
