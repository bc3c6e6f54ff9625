// File: accumulate_grad.h
// AccumulateGrad: the node that hands a leaf its gradient, as data: the leaf it belongs to. It runs as
// soon as it is ready (sequence number UINT64_MAX); the engine does the accumulation itself
// (autograd/accumulate.h), which needs ops this layer sits below.
#pragma once

#include "graph/node.h"

namespace census {

class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(Ref<TensorImpl> variable)
      : Node("AccumulateGrad", kAccumulateGradSequenceNr), variable_(std::move(variable)) {}
  ~AccumulateGrad() override {
    if (variable_->grad_accumulator == this) variable_->grad_accumulator = nullptr;
  }

  // Never called: the engine accumulates (autograd/accumulate.h).
  GradList apply(GradList& /*grads*/) override { return {}; }
  TensorImpl& variable() const { return *variable_; }

 private:
  Ref<TensorImpl> variable_;
};

}  // namespace census
