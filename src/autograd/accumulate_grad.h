// File: accumulate_grad.h
// AccumulateGrad: the node that hands a leaf its gradient. It runs as soon as it is ready (sequence
// number UINT64_MAX). The first gradient is stolen into .grad when nothing else holds it and its
// layout obeys the leaf's; otherwise it is cloned. A leaf that is a parameter tells observers
// (the parameter's tensor hook) before.
#pragma once

#include "autograd/node.h"

namespace census {

class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(Ref<TensorImpl> variable)
      : Node("AccumulateGrad", kAccumulateGradSequenceNr), variable_(std::move(variable)) {}

  GradList apply(GradList& grads) override;

 private:
  Ref<TensorImpl> variable_;
};

}  // namespace census
