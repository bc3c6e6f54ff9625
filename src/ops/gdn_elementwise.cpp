// Elementwise ops and factories of the gated delta net (Qwen3-Next and Qwen3.5 linear attention): the
// gates (sigmoid, softplus, exp), the chunked rule's masks and decays (tril, triu, cumsum, masked_fill)
// and the tensors it starts from (ones, zeros, eye). Above each node, the derivatives.yaml entry it follows.
#include "ops/internal.h"
#include "ops/ops.h"

namespace census::ops {
using internal::alloc;
using internal::dispatch;

namespace {

Tensor like(const Tensor& a, DType dtype) { return alloc(a.sizes(), internal::elementwise_strides(a.sizes(), {&a}), dtype); }

Tensor unary(Op op, const Tensor& self) {
  Tensor out = like(self, self.dtype());
  dispatch<1, 1>(op, {self}, {out});
  return out;
}

// sub.Tensor(Tensor self, Tensor other, Scalar alpha)
//   self: grad;  other: maybe_multiply(-grad, alpha)   -> saves nothing; other's gradient is a negation
class SubBackward0 final : public Node {
 public:
  explicit SubBackward0(uint64_t seq) : Node("SubBackward0", seq) {}
  GradList apply(GradList& grads) override {
    GradList out(2);
    if (should_compute_output(0)) out[0] = grads[0];
    if (should_compute_output(1)) out[1] = neg(grads[0]);
    return out;
  }
};

// exp(Tensor self)  self: grad * result.conj()   -> saves result
class ExpBackward0 final : public Node {
 public:
  explicit ExpBackward0(uint64_t seq) : Node("ExpBackward0", seq) {}
  GradList apply(GradList& grads) override {
    const Tensor result = result_.unpack();
    return {mul(grads[0], result)};
  }
  SavedVariable result_{this};
};

// sigmoid(Tensor self)  self: sigmoid_backward(grad, result)   -> saves result
class SigmoidBackward0 final : public Node {
 public:
  explicit SigmoidBackward0(uint64_t seq) : Node("SigmoidBackward0", seq) {}
  GradList apply(GradList& grads) override {
    const Tensor result = result_.unpack();
    Tensor out = like(grads[0], promote(grads[0].dtype(), result.dtype()));
    dispatch<2, 1>(Op::kSigmoidBackward, {grads[0], result}, {out});
    return {out};
  }
  SavedVariable result_{this};
};

// softplus(Tensor self, Scalar beta, Scalar threshold)
//   self: softplus_backward(grad, self, beta, threshold)   -> saves self
class SoftplusBackward0 final : public Node {
 public:
  explicit SoftplusBackward0(uint64_t seq) : Node("SoftplusBackward0", seq) {}
  GradList apply(GradList& grads) override {
    const Tensor self = self_.unpack();
    Tensor out = like(grads[0], promote(grads[0].dtype(), self.dtype()));
    dispatch<2, 1>(Op::kSoftplusBackward, {grads[0], self}, {out});
    return {out};
  }
  SavedVariable self_{this};
};

// tril(Tensor self, int diagonal)  self: grad.tril(diagonal);  triu likewise   -> saves nothing
class TriangleBackward final : public Node {
 public:
  TriangleBackward(uint64_t seq, bool lower, int64_t diagonal)
      : Node(lower ? "TrilBackward0" : "TriuBackward0", seq), lower_(lower), diagonal_(diagonal) {}
  GradList apply(GradList& grads) override {
    return {lower_ ? tril(grads[0], diagonal_) : triu(grads[0], diagonal_)};
  }

 private:
  bool lower_;
  int64_t diagonal_;
};

// cumsum(Tensor self, int dim, ScalarType? dtype)  self: cumsum_backward(grad.to(self.scalar_type()), dim)
// FunctionsManual's cumsum_backward is the reversed cumsum grad.flip(dim).cumsum(dim).flip(dim): three
// allocations, the first two freed with the expression.
class CumsumBackward0 final : public Node {
 public:
  CumsumBackward0(uint64_t seq, int64_t dim, DType self_dtype)
      : Node("CumsumBackward0", seq), dim_(dim), self_dtype_(self_dtype) {}
  GradList apply(GradList& grads) override {
    const Tensor grad = to(grads[0], self_dtype_);
    if (grad.numel() <= 1 || grad.size(dim_) == 1) return {grad};
    return {flip(cumsum(flip(grad, dim_), dim_), dim_)};
  }

 private:
  int64_t dim_;
  DType self_dtype_;
};

// masked_fill.Scalar(Tensor self, Tensor mask, Scalar value)
//   self: grad.masked_fill(mask, 0);  mask: non_differentiable   -> saves mask
class MaskedFillBackward0 final : public Node {
 public:
  explicit MaskedFillBackward0(uint64_t seq) : Node("MaskedFillBackward0", seq) {}
  GradList apply(GradList& grads) override {
    const Tensor mask = mask_.unpack();
    return {masked_fill(grads[0], mask)};
  }
  SavedVariable mask_{this};
};

}  // namespace

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

Tensor zeros_like(const Tensor& self) {
  Tensor out = alloc(self.sizes(), internal::dense_strides_like(self, self.sizes()), self.dtype());
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

Tensor sub(const Tensor& self, const Tensor& other) {
  auto node = make_node<SubBackward0>({&self, &other});
  const Dims sizes = internal::broadcast_sizes(self.sizes(), other.sizes());
  Tensor out = alloc(sizes, internal::elementwise_strides(sizes, {&self, &other}), promote(self.dtype(), other.dtype()));
  dispatch<2, 1>(Op::kSub, {self, other}, {out});
  set_history(out, node);
  return out;
}

Tensor exp(const Tensor& self) {
  auto node = make_node<ExpBackward0>({&self});
  Tensor out = unary(Op::kExp, self);
  set_history(out, node);
  if (node) node->result_.save(out, /*is_output=*/true);
  return out;
}

Tensor sigmoid(const Tensor& self) {
  auto node = make_node<SigmoidBackward0>({&self});
  Tensor out = unary(Op::kSigmoid, self);
  set_history(out, node);
  if (node) node->result_.save(out, /*is_output=*/true);
  return out;
}

Tensor softplus(const Tensor& self) {
  auto node = make_node<SoftplusBackward0>({&self});
  if (node) node->self_.save(self);
  Tensor out = unary(Op::kSoftplus, self);
  set_history(out, node);
  return out;
}

Tensor tril(const Tensor& self, int64_t diagonal) {
  auto node = make_node<TriangleBackward>({&self}, /*lower=*/true, diagonal);
  Tensor out = unary(Op::kTril, self);
  set_history(out, node);
  return out;
}

Tensor triu(const Tensor& self, int64_t diagonal) {
  auto node = make_node<TriangleBackward>({&self}, /*lower=*/false, diagonal);
  Tensor out = unary(Op::kTriu, self);
  set_history(out, node);
  return out;
}

Tensor cumsum(const Tensor& self, int64_t dim, std::optional<DType> dtype) {
  auto node = make_node<CumsumBackward0>({&self}, wrap_dim(dim, self.dim()), self.dtype());
  Tensor out = like(self, dtype.value_or(self.dtype()));
  dispatch<1, 1>(Op::kCumsum, {self}, {out});
  set_history(out, node);
  return out;
}

// flip runs only in cumsum's backward, under no_grad: it records no node.
Tensor flip(const Tensor& self, int64_t /*dim*/) { return unary(Op::kFlip, self); }

Tensor masked_fill(const Tensor& self, const Tensor& mask) {
  auto node = make_node<MaskedFillBackward0>({&self});
  if (node) node->mask_.save(mask);
  // ATen clones the (broadcast) input contiguously, then fills it in place.
  const Dims sizes = internal::broadcast_sizes(self.sizes(), mask.sizes());
  Tensor out = alloc(sizes, self.dtype());
  dispatch<2, 1>(Op::kMaskedFill, {self, mask}, {out});
  set_history(out, node);
  return out;
}

}  // namespace census::ops
