#include "autograd/accumulate.h"

#include "ops/dispatch.h"
#include "ops/ops.h"

namespace census {
namespace {

// The strides a leaf's .grad must have to be stolen: the leaf's own, dimensions of size 1 aside. A
// gradient larger than its leaf is a tensor-parallel rank's replicated gradient of its shard (DTensor's
// Replicate .grad of a Shard(0) vocabulary table, ops::vocab_parallel_embedding): of the DTensor's global
// shape, it obeys the contract there, and is stolen as it comes.
bool obeys_layout_contract(const Tensor& grad, const TensorImpl& variable) {
  if (grad.numel() > variable.sizes.product()) return true;
  if (grad.sizes() != variable.sizes) return false;
  for (int i = 0; i < grad.dim(); ++i)
    if (grad.sizes()[i] != 1 && grad.strides()[i] != variable.strides[i]) return false;
  return true;
}

}  // namespace

// Note [Stealing the first gradient]
// PyTorch's AccumulateGrad::accumulateGrad sets .grad to the incoming gradient itself, no copy, when
// grad mode is off, the gradient is referenced by nothing else (use_count <= 1), and its strides obey
// the leaf's layout; else it clones. A linear weight's gradient arrives as the t() view of an mm
// output with the weight's own strides, and is stolen. A residual stream's gradient that another
// node's buffer still holds is cloned.
void accumulate_grad(const AccumulateGrad& node, GradList& grads) {
  Tensor& grad = grads[0];
  if (!grad.defined()) return;
  TensorImpl& variable = node.variable();
  if (variable.storage->is_parameter) Session::current().notify_parameter_grad(grad);
  if (!variable.grad) {
    if (grad.use_count() <= 1 && obeys_layout_contract(grad, variable)) {
      variable.grad = grad.detach().impl_ptr();
    } else {
      variable.grad = ops::clone(grad).impl_ptr();
    }
  } else {
    // Note [Accumulating into an existing .grad] A later backward (the next micro-batch) finds .grad
    // defined; with grad mode off AccumulateGrad runs `variable_grad += new_grad`: in place, no
    // allocation, the incoming gradient freed once the node has run. The step oracle's op log shows
    // it (one add_ per parameter per micro-batch after the first, .grad's storage unchanged).
    Tensor existing(variable.grad);
    ops::add_(existing, grad);
  }
  // Post-accumulate-grad hooks run once .grad holds the sum, before the node returns: the incoming
  // gradient is still the engine's input then.
  if (const auto& hook = Session::current().post_accumulate_grad_hook(); hook && variable.storage->is_parameter)
    hook(variable);
}

}  // namespace census
