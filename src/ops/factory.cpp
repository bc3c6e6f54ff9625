// Factories: tensors made from no tensor input (empty, zeros, ones, eye, arange, the new_* and *_like
// forms). They record no node.
#include "ops/internal.h"
#include "ops/ops.h"

namespace census::ops {
using internal::alloc;
using internal::dispatch;

Tensor empty(const Dims& sizes, DType dtype) {
  Tensor out = alloc(sizes, dtype);
  dispatch<0, 1>(Op::kEmpty, {}, {out});
  return out;
}

Tensor copy_from_host(const Dims& host_sizes, DType dtype, const Dims& sizes, const Dims& strides,
                      int64_t storage_offset) {
  Tensor copy = alloc(host_sizes, dtype);
  dispatch<0, 1>(Op::kToCopy, {}, {copy});
  if (sizes == host_sizes && strides == copy.strides() && storage_offset == 0) return copy;
  Tensor view = internal::alias(copy, sizes, strides);
  view.impl()->storage_offset = storage_offset;
  return view;
}

Tensor copy_across_devices(const Tensor& self) {
  Tensor out = alloc(self.sizes(), internal::dense_strides_like(self, self.sizes()), self.dtype());
  dispatch<1, 1>(Op::kToCopy, {self}, {out});
  return out;
}

Tensor empty_like(const Tensor& self) {
  Tensor out = alloc(self.sizes(), internal::dense_strides_like(self, self.sizes()), self.dtype());
  dispatch<1, 1>(Op::kEmptyLike, {self}, {out});
  return out;
}

Tensor new_zeros(const Tensor& self, const Dims& sizes) { return new_zeros(self, sizes, self.dtype()); }

Tensor new_zeros(const Tensor& self, const Dims& sizes, DType dtype) {
  Tensor out = alloc(sizes, dtype);
  dispatch<1, 1>(Op::kNewZeros, {self}, {out});
  return out;
}

Tensor new_empty(const Tensor& self, const Dims& sizes) {
  Tensor out = alloc(sizes, self.dtype());
  dispatch<1, 1>(Op::kNewEmpty, {self}, {out});
  return out;
}

Tensor arange(int64_t end, DType dtype) {
  Tensor out = alloc(Dims{end}, dtype);
  dispatch<0, 1>(Op::kArange, {}, {out});
  return out;
}

Tensor ones(const Dims& sizes, DType dtype) {
  Tensor out = alloc(sizes, dtype);
  dispatch<0, 1>(Op::kOnes, {}, {out});
  return out;
}

Tensor zeros(const Dims& sizes, DType dtype) {
  Tensor out = alloc(sizes, dtype);
  dispatch<0, 1>(Op::kZeros, {}, {out});
  return out;
}

Tensor zeros_like(const Tensor& self) { return zeros_like(self, self.dtype()); }

Tensor zeros_like(const Tensor& self, DType dtype) {
  Tensor out = alloc(self.sizes(), internal::dense_strides_like(self, self.sizes()), dtype);
  dispatch<1, 1>(Op::kZerosLike, {self}, {out});
  return out;
}

Tensor eye(int64_t n, DType dtype) {
  Tensor out = alloc(Dims{n, n}, dtype);
  dispatch<0, 1>(Op::kEye, {}, {out});
  return out;
}

Tensor new_empty_strided(const Tensor& self, const Dims& sizes, const Dims& strides) {
  Tensor out = alloc(sizes, strides, self.dtype());
  dispatch<1, 1>(Op::kNewEmptyStrided, {self}, {out});
  return out;
}

}  // namespace census::ops
