// File: causal_conv1d.h
// Transformers' causal_conv1d_fn, the torch fallback a census runs (the causal_conv1d package's kernel
// would replace it where installed): a depthwise conv1d padded by K - 1 on both sides, cut back to the
// first S positions, then the activation.
//
//   x (B, C, S)  ->  conv (B, C, S + K - 1), saving x and the weight  ->  [:, :, :S] (a view)
//   -> act: silu saves its input, the view, so the whole conv output stays alive  ->  (B, C, S)
#pragma once

#include "nn/mlp.h"
#include "tensor/tensor.h"

namespace census::nn {

// `weight` is the conv's weight squeezed to (C, K), as the gated delta net hands it over; `bias` the
// conv's bias (C), which a Mamba-2 mixer's conv has (use_conv_bias) and the gated delta net's has not.
Tensor causal_conv1d_fn(const Tensor& hidden_states, const Tensor& weight, HiddenAct activation,
                        const Tensor& bias = Tensor());

}  // namespace census::nn
