// File: attention_kernel.h
// The attention function a census registers with Transformers' attention interface: the flash
// kernel's contract (ops::flash_attention) on q (B, Nh, S, D), k and v (B, Nkv, S, D), grouped K/V not
// expanded, returning the output laid out (B, S, Nh, Dv) and contiguous.
#pragma once

#include "tensor/tensor.h"

namespace census::nn {

Tensor flash_attention_forward(const Tensor& query, const Tensor& key, const Tensor& value);

}  // namespace census::nn
