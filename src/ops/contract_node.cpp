#include "ops/contract_node.h"

#include "ops/ops.h"

namespace census::ops::internal {

GradList ContractBackward::apply(GradList& grads) {
  std::vector<Tensor> materialized;
  for (size_t i = 0; i < outputs_.size(); ++i)
    if (!grads[i].defined()) materialized.push_back(new_zeros(grads[0], outputs_[i].sizes, outputs_[i].dtype));
  // ctx.saved_tensors: every saved tensor unpacked; those no gradient needs dropped at once.
  std::vector<Tensor> inputs;
  {
    std::vector<Tensor> saved;
    for (size_t i = 0; i < saved_count_; ++i) saved.push_back(saved_[i].unpack());
    for (int index : grad_of_) inputs.push_back(index >= 0 ? saved[static_cast<size_t>(index)] : Tensor());
  }
  GradList out(next_edges().size());
  for (size_t i = 0; i < inputs.size() && i < out.size(); ++i)
    if (inputs[i].defined()) out[i] = empty_like(inputs[i]);
  return out;
}

}  // namespace census::ops::internal
