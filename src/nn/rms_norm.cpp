#include "nn/rms_norm.h"

#include "ops/ops.h"

namespace census::nn {

LlamaRMSNorm::LlamaRMSNorm(std::string path, int64_t dim, double eps, ParameterList& params, int64_t liger_sm_count)
    : path_(std::move(path)), variance_epsilon_(eps), liger_sm_count_(liger_sm_count) {
  weight_ = register_parameter(params, path_, "weight", Dims{dim});
}

Tensor LlamaRMSNorm::forward(const Tensor& input) const {
  ModuleScope scope(path_, ModuleKind::kNorm);
  // LigerRMSNorm.forward: LigerRMSNormFunction.apply(hidden_states, self.weight, ...), Liger's defaults for Llama.
  if (liger_sm_count_ > 0) return ops::liger_rms_norm(input, weight_, liger_sm_count_);
  const DType input_dtype = input.dtype();
  Tensor hidden_states = ops::to(input, DType::kFloat32);
  Tensor variance = ops::mean(ops::pow(hidden_states, 2), -1, /*keepdim=*/true);
  hidden_states = ops::mul(hidden_states, ops::rsqrt(ops::add(variance, variance_epsilon_)));
  return ops::mul(weight_, ops::to(hidden_states, input_dtype));
}

GemmaRMSNorm::GemmaRMSNorm(std::string path, int64_t dim, double eps, ParameterList& params, int64_t liger_sm_count,
                           bool liger_in_place)
    : path_(std::move(path)), eps_(eps), liger_sm_count_(liger_sm_count), liger_in_place_(liger_in_place) {
  weight_ = register_parameter(params, path_, "weight", Dims{dim});
}

Tensor GemmaRMSNorm::forward(const Tensor& x) const {
  ModuleScope scope(path_, ModuleKind::kNorm);
  // LigerRMSNorm.forward with offset 1.0 and casting_mode "gemma", as _patch_rms_norm_module_for_gemma* set them.
  if (liger_sm_count_ > 0) return ops::liger_rms_norm(x, weight_, liger_sm_count_, liger_in_place_);
  // _norm(x.float()): x * rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
  Tensor h = ops::to(x, DType::kFloat32);
  Tensor output = ops::mul(h, ops::rsqrt(ops::add(ops::mean(ops::pow(h, 2), -1, /*keepdim=*/true), eps_)));
  h = Tensor();
  output = ops::mul(output, ops::add(ops::to(weight_, DType::kFloat32), 1.0));
  return ops::to(output, x.dtype());
}


GptOssRMSNorm::GptOssRMSNorm(std::string path, int64_t dim, double eps, ParameterList& params)
    : path_(std::move(path)), variance_epsilon_(eps) {
  weight_ = register_parameter(params, path_, "weight", Dims{dim});
}

Tensor GptOssRMSNorm::forward(const Tensor& input) const {
  ModuleScope scope(path_, ModuleKind::kNorm);
  const DType input_dtype = input.dtype();
  Tensor hidden_states = ops::to(input, DType::kFloat32);
  Tensor variance = ops::mean(ops::pow(hidden_states, 2), -1, /*keepdim=*/true);
  hidden_states = ops::mul(hidden_states, ops::rsqrt(ops::add(variance, variance_epsilon_)));
  return ops::to(ops::mul(weight_, hidden_states), input_dtype);
}

}  // namespace census::nn
