#include "tensor/tensor.h"

#include "tensor/arena.h"


namespace census {

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  for (int i = dim() - 1; i >= 0; --i) {
    if (sizes()[i] == 1) continue;
    if (strides()[i] != expected) return false;
    expected *= sizes()[i];
  }
  return true;
}

bool Tensor::is_non_overlapping_and_dense() const {
  if (is_contiguous()) return true;
  // Sort dimensions by stride and check they tile the span with no gap and no overlap.
  // Dimensions by increasing stride (insertion sort: ranks are small).
  const int rank = dim();
  int order[Dims::kMaxRank];
  for (int i = 0; i < rank; ++i) {
    int j = i;
    while (j > 0 && strides()[order[j - 1]] > strides()[i]) {
      order[j] = order[j - 1];
      --j;
    }
    order[j] = i;
  }
  int64_t expected = 1;
  for (int i = 0; i < rank; ++i) {
    const int d = order[i];
    if (sizes()[d] == 1) continue;
    if (strides()[d] != expected) return false;
    expected *= sizes()[d];
  }
  return true;
}

Tensor Tensor::detach() const {
  auto impl = arena_shared<TensorImpl>();
  impl->sizes = impl_->sizes;
  impl->strides = impl_->strides;
  impl->dtype = impl_->dtype;
  impl->storage = impl_->storage;
  impl->storage_offset = impl_->storage_offset;
  return Tensor(std::move(impl));
}

std::string Tensor::describe() const { return std::string(dtype_name(dtype())) + sizes().str(); }

}  // namespace census
