#include "autograd/node.h"

#include "autograd/accumulate_grad.h"
#include "autograd/checkpoint.h"
#include "ops/dispatch.h"
#include "ops/ops.h"

namespace census {

void SavedVariable::save(const Tensor& tensor, bool is_output) {
  Session& session = Session::current();
  if (CheckpointFrame* frame = session.checkpoint()) {
    if (frame->phase == CheckpointFrame::Phase::kForward) {
      // The checkpoint's pack hook: a holder, no tensor.
      frame_ = session.checkpoint_owner();
      holder_ = frame->holders++;
      frame->holder_gone.push_back(0);
      state_ = State::kPacked;
      return;
    }
    // The recompute's pack hook: the tensor goes to the frame, for the holder packed in this order.
    const auto holder = static_cast<size_t>(frame->recomputed_count++);
    if (!frame->holder_gone[holder]) frame->recomputed[holder] = tensor.detach();
    if (frame->recomputed_count == frame->holders) throw StopRecomputation{};
    return;
  }
  session.notify_save(tensor);
  data_ = is_output ? tensor.detach() : tensor;
  state_ = State::kSaved;
}

Tensor SavedVariable::unpack() {
  if (state_ != State::kPacked) return data_;
  if (!frame_->recomputed_done) frame_->recompute();
  // The frame lets go of it: the node unpacking it holds the only reference from now.
  return std::move(frame_->recomputed[static_cast<size_t>(holder_)]);
}

SavedVariable::~SavedVariable() { reset(); }

void SavedVariable::reset() {
  if (state_ == State::kPacked) frame_->holder_gone[static_cast<size_t>(holder_)] = 1;
  if (state_ == State::kSaved || state_ == State::kPacked) state_ = State::kReleased;
  data_ = Tensor();
  frame_.reset();
}

Edge gradient_edge(const Tensor& tensor) {
  TensorImpl* impl = tensor.impl();
  if (impl->grad_fn) return Edge{impl->grad_fn, impl->output_nr, impl->sizes, impl->dtype};
  if (!impl->requires_grad) return Edge{};
  Ref<Node> accumulator = impl->grad_accumulator.lock();
  if (!accumulator) {
    accumulator = arena_shared<AccumulateGrad>(tensor.impl_ptr());
    impl->grad_accumulator = accumulator;
  }
  return Edge{accumulator, 0, impl->sizes, impl->dtype};
}

void set_history(const Tensor& out, const Ref<Node>& node, uint32_t output_nr) {
  if (!node) return;
  out.impl()->grad_fn = node;
  out.impl()->output_nr = output_nr;
}

namespace {

// The strides a leaf's .grad must have to be stolen: the leaf's own, dimensions of size 1 aside.
bool obeys_layout_contract(const Tensor& grad, const TensorImpl& variable) {
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
GradList AccumulateGrad::apply(GradList& grads) {
  Tensor& grad = grads[0];
  if (!grad.defined()) return {};
  if (variable_->storage->is_parameter) Session::current().notify_parameter_grad(grad);
  if (!variable_->grad) {
    if (grad.use_count() <= 1 && obeys_layout_contract(grad, *variable_)) {
      variable_->grad = grad.detach().impl_ptr();
    } else {
      variable_->grad = ops::clone(grad).impl_ptr();
    }
  } else {
    // Note [Accumulating into an existing .grad] A later backward (the next micro-batch) finds .grad
    // defined; with grad mode off AccumulateGrad runs `variable_grad += new_grad`: in place, no
    // allocation, the incoming gradient freed once the node has run. The step oracle's op log shows
    // it (one add_ per parameter per micro-batch after the first, .grad's storage unchanged).
    Tensor existing(variable_->grad);
    ops::add_(existing, grad);
  }
  return {};
}

}  // namespace census
