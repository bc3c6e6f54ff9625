#include "nn/linear.h"

#include "nn/float8_training.h"
#include "nn/lora.h"
#include "nn/tensor_parallel.h"
#include "ops/ops.h"

namespace census::nn {

Linear::Linear(std::string path, int64_t in_features, int64_t out_features, bool bias, ParameterList& params,
               DType dtype)
    : path_(std::move(path)) {
  if (bnb_quantizes(path_)) {
    quantized_ = make_linear4bit_weight(path_, in_features, out_features, params);
    weight_ = quantized_->packed;
    // Linear4bit.forward casts bias.data to the compute dtype at its first call: so it is at every later one.
    if (bias) {
      const ParametersKeepDtype keep;
      bias_ = register_parameter(params, path_, "bias", Dims{out_features}, bnb_4bit_config()->compute_dtype);
    }
  } else {
    weight_ = register_parameter(params, path_, "weight", Dims{out_features, in_features}, dtype);
    if (bias) bias_ = register_parameter(params, path_, "bias", Dims{out_features}, dtype);
    // PEFT's modules_to_save: the original frozen, its trained copy run (check_lora refuses one with a bias).
    if (lora_saves(path_)) weight_ = make_module_to_save(path_, weight_, params);
  }
  if (lora_adapts(path_)) {
    const ParametersKeepDtype keep;  // PEFT adds the adapters after prepare_model_for_kbit_training
    lora_ = make_lora_adapter(path_, in_features, out_features, params);
  }
}

Tensor Linear::forward(const Tensor& input) const {
  ModuleScope scope(path_, ModuleKind::kOther);
  if (const ParallelStyles* styles = parallel_styles()) return styles->linear(path_, input, weight_, bias_);
  if (quantized_) {
    Tensor result = linear4bit_forward(input, *quantized_, bias_);
    return lora_ ? lora_forward_4bit(input, std::move(result), *lora_, *quantized_, bias_) : result;
  }
  Tensor result = linear(input, weight_, bias_);
  return lora_ ? lora_forward(input, std::move(result), *lora_, weight_, bias_) : result;
}

Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  if (const std::optional<ops::Float8Recipe> recipe = float8_recipe(); recipe && float8_converts(weight))
    return ops::float8_linear(input, weight, bias, *recipe);
  return ops::linear(input, weight, bias);
}

}  // namespace census::nn
