// File: engine.h
// The backward engine as PyTorch's runs it on one thread: from the root, the ready node with the
// highest sequence number runs first (AccumulateGrad, numbered UINT64_MAX, as soon as it is ready).
// Running a node: take its gradients out of its InputBuffer, apply it under no_grad, validate its
// outputs (sum_to a broadcast input's shape, cast to the input's dtype), drop its incoming gradients,
// release its saved tensors, then hand each output to the next node's InputBuffer.
#pragma once

#include "tensor/tensor.h"

namespace census {

// Run the backward of `root` with gradient `grad` (as out.backward(grad)); the graph is not kept.
void run_backward(const Tensor& root, const Tensor& grad);

}  // namespace census
