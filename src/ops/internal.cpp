#include "ops/internal.h"

#include <algorithm>

namespace census::ops::internal {

Tensor alloc(const Dims& sizes, const Dims& strides, DType dtype) {
  auto impl = arena_shared<TensorImpl>();
  impl->sizes = sizes;
  impl->strides = strides;
  impl->dtype = dtype;
  impl->storage = Session::current().new_storage(sizes.product() * element_size(dtype));
  return Tensor(std::move(impl));
}

Tensor alias(const Tensor& base, const Dims& sizes, const Dims& strides) {
  auto impl = arena_shared<TensorImpl>();
  impl->sizes = sizes;
  impl->strides = strides;
  impl->dtype = base.dtype();
  impl->storage = base.storage();
  impl->storage_offset = base.storage_offset();
  return Tensor(std::move(impl));
}

Tensor alias(const Tensor& base, const Dims& sizes, const Dims& strides, DType dtype) {
  auto impl = arena_shared<TensorImpl>();
  impl->sizes = sizes;
  impl->strides = strides;
  impl->dtype = dtype;
  impl->storage = base.storage();
  impl->storage_offset = base.storage_offset();
  return Tensor(std::move(impl));
}

Dims dense_strides_like(const Tensor& like, const Dims& sizes) {
  const int rank = sizes.size();
  if (like.dim() != rank || like.is_contiguous() || !like.is_non_overlapping_and_dense())
    return contiguous_strides(sizes);
  // Outermost first: larger strides first; ties keep the original order (a stable insertion sort).
  int order[Dims::kMaxRank];
  for (int i = 0; i < rank; ++i) {
    int j = i;
    while (j > 0 && like.strides()[order[j - 1]] < like.strides()[i]) {
      order[j] = order[j - 1];
      --j;
    }
    order[j] = i;
  }
  Dims strides = sizes;
  int64_t step = 1;
  for (int i = rank - 1; i >= 0; --i) {
    strides[order[i]] = step;
    step *= sizes[order[i]];
  }
  return strides;
}

Dims elementwise_strides(const Dims& sizes, std::initializer_list<const Tensor*> inputs) {
  for (const Tensor* input : inputs)
    if (input->sizes() == sizes) return dense_strides_like(*input, sizes);
  return contiguous_strides(sizes);
}

Dims broadcast_sizes(const Dims& a, const Dims& b) {
  const int rank = std::max(a.size(), b.size());
  Dims out;
  for (int i = 0; i < rank; ++i) {
    const int ia = i - (rank - a.size());
    const int ib = i - (rank - b.size());
    const int64_t sa = ia >= 0 ? a[ia] : 1;
    const int64_t sb = ib >= 0 ? b[ib] : 1;
    out.push_back(sa == 1 ? sb : sa);
  }
  return out;
}

// ATen's at::detail::computeStride: walk the old dimensions in chunks that are contiguous among
// themselves and map each chunk onto new dimensions of the same element count.
std::optional<Dims> view_strides(const Tensor& self, const Dims& sizes) {
  const Dims& old_sizes = self.sizes();
  const Dims& old_strides = self.strides();
  Dims new_strides = sizes;
  if (old_sizes.empty()) {
    for (int i = 0; i < sizes.size(); ++i) new_strides[i] = 1;
    return new_strides;
  }
  if (self.numel() == 0) return contiguous_strides(sizes);
  int view_d = sizes.size() - 1;
  int64_t chunk_base_stride = old_strides.back();
  int64_t tensor_numel = 1;
  int64_t view_numel = 1;
  for (int tensor_d = old_sizes.size() - 1; tensor_d >= 0; --tensor_d) {
    tensor_numel *= old_sizes[tensor_d];
    if (tensor_d == 0 ||
        (old_sizes[tensor_d - 1] != 1 && old_strides[tensor_d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || sizes[view_d] == 1)) {
        new_strides[view_d] = view_numel * chunk_base_stride;
        view_numel *= sizes[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (tensor_d > 0) {
        chunk_base_stride = old_strides[tensor_d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return new_strides;
}

}  // namespace census::ops::internal
