// File: internal.h
// Helpers shared by the op files: allocation, aliasing, layout and dispatch. Not for use outside ops/.
#pragma once

#include <array>
#include <initializer_list>
#include <optional>
#include <span>
#include <vector>

#include "graph/node.h"
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
// A reduction's result: `sizes` less `dims` (each kept as 1 with keepdim).
Dims reduced_sizes(const Dims& sizes, const std::vector<int>& dims, bool keepdim);
// ATen's computeStride: the strides of a view of `sizes` onto a tensor, if a view can express it.
std::optional<Dims> view_strides(const Tensor& self, const Dims& sizes);

template <size_t N, size_t M>
void dispatch(Op op, const std::array<Tensor, N>& inputs, const std::array<Tensor, M>& outputs) {
  Session::current().dispatch(OpCall{op_def(op), inputs, outputs});
}
inline void dispatch(Op op, std::span<const Tensor> inputs, std::span<const Tensor> outputs) {
  Session::current().dispatch(OpCall{op_def(op), inputs, outputs});
}

// Note [Ops through the dispatch mode] An op whose outputs a dispatch mode may answer (a checkpoint's
// cache answers the ops its policy saves, Note [Selective checkpoint policy]) runs through run_op: the
// mode decides first; unless it answered, `make` allocates the outputs into `outputs` and the call is
// dispatched with the mode's decision. A mode refuses a call it was not asked about whose catalogue
// row says it may answer it, so no such op can bypass it.
template <class Make>
void run_op(Op op, std::span<const Tensor> inputs, std::span<Tensor> outputs, Make&& make) {
  Session& session = Session::current();
  const OpDef& def = op_def(op);
  ModeDecision decision = ModeDecision::kNone;
  if (DispatchMode* mode = session.mode()) {
    decision = mode->decide(def, inputs, outputs);
    if (decision == ModeDecision::kAnswered) return;
  }
  make();
  session.dispatch(OpCall{def, inputs, outputs, decision});
}
// One output, which `make` returns.
template <class Make>
Tensor run_op(Op op, std::span<const Tensor> inputs, Make&& make) {
  Tensor out[1];
  run_op(op, inputs, out, [&] { out[0] = make(); });
  return std::move(out[0]);
}

}  // namespace census::ops::internal
