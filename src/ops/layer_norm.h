// File: layer_norm.h
// nn.LayerNorm's forward (native_layer_norm) over the last dim, with weight and bias, and the
// tensor-tensor comparison a causal mask is built with (DeepSeek-V3.2's Lightning indexer runs both).
#pragma once

#include "tensor/tensor.h"

namespace census::ops {

// native_layer_norm(input, [D], weight, bias, eps) -> out in input's dtype; its node keeps the input,
// weight, bias, and the (..., 1) mean and rstd, in the input's dtype (as the CPU kernel and its fake
// return them).
Tensor layer_norm(const Tensor& input, const Tensor& weight, const Tensor& bias);

// self > other, broadcast: a bool tensor, no node.
Tensor gt(const Tensor& self, const Tensor& other);

}  // namespace census::ops
