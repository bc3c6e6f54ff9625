// File: embedding.h
// The token embedding as ATen runs it (nn.Embedding's forward), and the whole-tensor sum a backward
// from a model's last hidden state starts at (out.sum().backward()).
#pragma once

#include "tensor/tensor.h"

namespace census::ops {

// embedding(weight (V, H), indices (...) int64) -> (..., H) in weight's dtype; its node keeps the
// indices, and its backward (embedding_dense_backward) allocates the weight's gradient (V, H).
Tensor embedding(const Tensor& weight, const Tensor& indices);

// sum(self) -> a 0-d tensor of self's dtype; its node keeps self's sizes only, and its backward
// expands the gradient back (a view: no allocation).
Tensor sum(const Tensor& self);

}  // namespace census::ops
