// File: linear.h
// nn.Linear: y = x W^T (+ b), as ATen's linear decomposes it (ops::linear), or as torchao's Float8Linear
// runs it where the step trains in FP8; PEFT's lora.Linear where the step's adapters target it (nn/lora.h).
#pragma once

#include <optional>

#include "nn/linear4bit.h"
#include "nn/lora.h"
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
  Tensor weight_;  // (out, in); the packed 4-bit data where quantized; modules_to_save's trained copy where PEFT saves it
  Tensor bias_;    // (out) or undefined
  std::optional<Linear4bitWeight> quantized_;  // where bitsandbytes quantized it
  std::optional<LoraAdapter> lora_;  // where PEFT's LoRA adapts it
};

// input @ weight.t() (+ bias) as an nn.Linear of that weight runs it: a Float8Linear where the step trains
// in FP8 and torchtitan's filter converts it (nn/float8_training.h), else ops::linear.
Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias);

}  // namespace census::nn
