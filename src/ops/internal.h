// File: internal.h
// Helpers shared by the op files: allocation, aliasing, layout and dispatch. Not for use outside ops/.
#pragma once

#include <array>
#include <initializer_list>
#include <optional>
#include <span>
#include <vector>

#include "autograd/node.h"
#include "ops/dispatch.h"
#include "ops/op_def.h"
#include "tensor/tensor.h"

namespace census::ops::internal {

// A new tensor with its own storage, sized to its elements.
Tensor alloc(const Dims& sizes, const Dims& strides, DType dtype);
inline Tensor alloc(const Dims& sizes, DType dtype) { return alloc(sizes, contiguous_strides(sizes), dtype); }
// A tensor on `base`'s storage (a view).
Tensor alias(const Tensor& base, const Dims& sizes, const Dims& strides);
// A view of `base`'s storage read as another dtype (view_as_complex, view_as_real).
Tensor alias(const Tensor& base, const Dims& sizes, const Dims& strides, DType dtype);

// Dense strides for `sizes` in the dimension order of `like` (outermost first), as TensorIterator and
// preserve_format lay out a result next to a permuted input.
Dims dense_strides_like(const Tensor& like, const Dims& sizes);
// A new tensor of `like`'s sizes and dense layout (preserve_format), in `dtype`.
inline Tensor alloc_like(const Tensor& like, DType dtype) {
  return alloc(like.sizes(), dense_strides_like(like, like.sizes()), dtype);
}

// The layout of an elementwise result: that of the first full-size dense input, else row-major.
Dims elementwise_strides(const Dims& sizes, std::initializer_list<const Tensor*> inputs);
Dims broadcast_sizes(const Dims& a, const Dims& b);
// ATen's computeStride: the strides of a view of `sizes` onto a tensor, if a view can express it.
std::optional<Dims> view_strides(const Tensor& self, const Dims& sizes);

// Note [Selective checkpointing] In a checkpointed region each op the policy can save asks it: in
// the forward a saved op runs and its outputs are cached; in the recompute a saved op's outputs are
// popped from the cache instead, and nothing runs (no allocation, no dispatch).
enum class SacAction : uint8_t { kRun, kRunAndCache, kFromCache };
SacAction sac_action(Op op, std::span<const Tensor> inputs);
std::vector<Tensor> pop_cached(Op op);
void push_cached(Op op, std::vector<Tensor> outputs);

template <size_t N, size_t M>
void dispatch(Op op, const std::array<Tensor, N>& inputs, const std::array<Tensor, M>& outputs) {
  Session::current().dispatch(OpCall{op_def(op), inputs, outputs});
}
inline void dispatch(Op op, std::span<const Tensor> inputs, std::span<const Tensor> outputs) {
  Session::current().dispatch(OpCall{op_def(op), inputs, outputs});
}

}  // namespace census::ops::internal
