#include "graph/saved_variable.h"

#include "graph/context.h"

namespace census {

void SavedVariable::save(const Tensor& tensor, bool is_output) {
  switch (GraphContext::current().hooks().pack(tensor, hooks_, slot_)) {
    case SavedTensorHooks::Packed::kKept:
      data_ = is_output ? tensor.detach() : tensor;
      break;
    case SavedTensorHooks::Packed::kHeld:
    case SavedTensorHooks::Packed::kDropped:
      break;
  }
}

void SavedVariable::reset() {
  if (hooks_) hooks_->release(slot_);
  data_ = Tensor();
  hooks_.reset();
}

}  // namespace census
