// File: rms_norm_gated.h
// Qwen3NextRMSNormGated (Qwen3-Next's and Qwen3.5's gated delta net output norm): Llama's RMSNorm in
// fp32, cast back and scaled by its (ones-initialised) weight, then gated by silu of the gate in fp32.
//
//   h = x.to(fp32)                       saved by pow and mul
//   r = rsqrt(h.pow(2).mean(-1) + eps)   saved by rsqrt and mul
//   y = weight * (h * r).to(x.dtype)     the bf16 normalised input saved by the weight's mul
//   out = (y * silu(gate.to(fp32))).to(x.dtype)   y, and silu's fp32 input and output, saved
#pragma once

#include "nn/module.h"

namespace census::nn {

class RMSNormGated {
 public:
  RMSNormGated(std::string path, int64_t dim, double eps, ParameterList& params);
  Tensor forward(const Tensor& hidden_states, const Tensor& gate) const;

 private:
  std::string path_;
  Tensor weight_;  // (D) bf16, ones
  double variance_epsilon_;
};

}  // namespace census::nn
