// File: contract_node.h
// The autograd node of a kernel contract (a torch.library custom op with an autograd formula, as the
// reference census registers its kernels): it keeps the tensors the contract saves, hands its backward
// zeros for the gradients of the outputs nobody differentiates (Note [Materialized statistics
// gradients]: the Python node behind a custom op materializes them), unpacks every saved tensor, and
// returns empty tensors of its differentiable inputs' sizes. Not for use outside ops/.
#pragma once

#include <vector>

#include "ops/internal.h"

namespace census::ops::internal {

class ContractBackward final : public Node {
 public:
  struct Output {
    Dims sizes;
    DType dtype;
  };
  // `outputs`: the op's outputs, whose gradients flow in; `grad_of`: by input, which saved tensor's
  // shape its gradient takes (-1: none, an input no formula differentiates).
  ContractBackward(uint64_t seq, std::string_view name, std::vector<Output> outputs, std::vector<int> grad_of)
      : Node(name, seq), outputs_(std::move(outputs)), grad_of_(std::move(grad_of)) {
    set_num_inputs(static_cast<uint32_t>(outputs_.size()));
  }
  GradList apply(GradList& grads) override;
  // The contract's saves, in save_for_backward's order.
  void save(const Tensor& tensor, bool is_output) { saved_[saved_count_++].save(tensor, is_output); }

 private:
  std::vector<Output> outputs_;
  std::vector<int> grad_of_;
  SavedVariableList saved_{this, kMaxSaved};
  size_t saved_count_ = 0;
  static constexpr size_t kMaxSaved = 8;
};

}  // namespace census::ops::internal
