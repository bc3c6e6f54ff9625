// File: rms_norm.h
// LlamaRMSNorm (and its copies in Mistral, Qwen2, Qwen3): computed in fp32, cast back, then scaled by
// the weight in the input's dtype.
//
//   h = x.to(fp32)                 (.., D) fp32   saved by pow and mul
//   r = rsqrt(h.pow(2).mean(-1) + eps)   (.., 1) fp32   saved by rsqrt and mul
//   out = weight * (h * r).to(x.dtype)   the bf16 normalized input saved by the weight's mul
#pragma once

#include "nn/module.h"

namespace census::nn {

// A norm module, as a model's final norm is built: of the class of its layers' input norm.
class Norm {
 public:
  virtual ~Norm() = default;
  virtual Tensor forward(const Tensor& hidden_states) const = 0;
  // The sizes of what the model hands its end for one sequence of `seq_length` tokens: the last
  // hidden states (1, S, H), or DeepSeek-V4's streams (1, S, hc_mult, H), which its hc_head collapses
  // before the norm.
  virtual Dims input_sizes(int64_t batch, int64_t seq_length, int64_t hidden_size) const {
    return Dims{batch, seq_length, hidden_size};
  }
};

class LlamaRMSNorm final : public Norm {
 public:
  // `liger_sm_count` > 0: LigerRMSNorm's forward bound on the module, as Liger's patch binds it
  // (nn/liger_kernels.h), its backward's partial weight gradients spread over that many SMs.
  LlamaRMSNorm(std::string path, int64_t dim, double eps, ParameterList& params, int64_t liger_sm_count = 0);
  Tensor forward(const Tensor& hidden_states) const override;

 private:
  std::string path_;
  Tensor weight_;  // (D) bf16, ones
  double variance_epsilon_;
  int64_t liger_sm_count_;
};

// GemmaRMSNorm (Gemma, Gemma2, Gemma3): the weight applied as (1 + w) in fp32, before the cast back.
//
//   h = x.float()                             saved by pow and mul
//   r = rsqrt(h.pow(2).mean(-1) + eps)        saved by rsqrt and mul
//   y = (h * r) * (1.0 + weight.float())      h * r (fp32) and 1 + w (D, fp32) saved by that mul
//   out = y.type_as(x)
class GemmaRMSNorm final : public Norm {
 public:
  // `liger_sm_count` > 0: LigerRMSNorm's forward bound on the module with Gemma's offset and casting mode
  // (nn/liger_kernels.h), writing its input's gradient over the incoming one where `liger_in_place`.
  GemmaRMSNorm(std::string path, int64_t dim, double eps, ParameterList& params, int64_t liger_sm_count = 0,
               bool liger_in_place = true);
  Tensor forward(const Tensor& hidden_states) const override;

 private:
  std::string path_;
  Tensor weight_;  // (D) bf16, zeros
  double eps_;
  int64_t liger_sm_count_;
  bool liger_in_place_;
};


// GptOssRMSNorm: Llama's norm with the weight applied to the fp32 normalized states, before the cast.
//
//   h = x.float()                        saved by pow and mul
//   r = rsqrt(h.pow(2).mean(-1) + eps)   saved by rsqrt and mul
//   y = weight * (h * r)                 h * r (fp32) saved by that mul
//   out = y.to(x.dtype)
class GptOssRMSNorm final : public Norm {
 public:
  GptOssRMSNorm(std::string path, int64_t dim, double eps, ParameterList& params);
  Tensor forward(const Tensor& hidden_states) const override;

 private:
  std::string path_;
  Tensor weight_;  // (D) bf16, ones
  double variance_epsilon_;
};

}  // namespace census::nn
