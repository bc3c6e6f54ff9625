// File: linear.h
// nn.Linear: y = x W^T (+ b), as ATen's linear decomposes it (ops::linear).
#pragma once

#include "nn/module.h"

namespace census::nn {

class Linear {
 public:
  // `dtype`: the weight's (and bias's) dtype; fp32 where the module is built so (HunYuan's router wg).
  Linear(std::string path, int64_t in_features, int64_t out_features, bool bias, ParameterList& params,
         DType dtype = DType::kBFloat16);
  Tensor forward(const Tensor& input) const;
  const Tensor& weight() const { return weight_; }

 private:
  std::string path_;
  Tensor weight_;  // (out, in)
  Tensor bias_;    // (out) or undefined
};

}  // namespace census::nn
