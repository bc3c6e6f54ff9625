// Elementwise ops: arithmetic, activations, and the gated delta net's gates (sigmoid, softplus, exp), masks
// and decays (tril, triu, cumsum, masked_fill, flip). Above each node, the derivatives.yaml entry it follows.
#include "ops/autocast.h"
#include "ops/internal.h"
#include "ops/ops.h"

namespace census::ops {
using internal::alloc;
using internal::dispatch;
using internal::elementwise_strides;

namespace {

// Allocate an elementwise result of `a` (and `b`) with broadcasting and type promotion.
Tensor elementwise_result(const Tensor& a, DType dtype) {
  return alloc(a.sizes(), elementwise_strides(a.sizes(), {&a}), dtype);
}
Tensor elementwise_result(const Tensor& a, const Tensor& b) {
  const Dims sizes = internal::broadcast_sizes(a.sizes(), b.sizes());
  return alloc(sizes, elementwise_strides(sizes, {&a, &b}), promote(a.dtype(), b.dtype()));
}

// _to_copy(Tensor self, ...)  self: _to_copy_backward(grad, self.options())  -- saves nothing
class ToCopyBackward0 final : public Node {
 public:
  ToCopyBackward0(uint64_t seq, DType self_dtype) : Node("ToCopyBackward0", seq), self_dtype_(self_dtype) {}
  GradList apply(GradList& grads) override { return {to(grads[0], self_dtype_)}; }

 private:
  DType self_dtype_;
};

// pow.Tensor_Scalar(Tensor self, Scalar exponent)  self: pow_backward(grad, self, exponent)
class PowBackward0 final : public Node {
 public:
  PowBackward0(uint64_t seq, double exponent) : Node("PowBackward0", seq), exponent_(exponent) {}
  GradList apply(GradList& grads) override {
    // grad * (exponent * self.pow(exponent - 1)): three allocations, two freed with the expression.
    const Tensor self = self_.unpack();
    return {mul(grads[0], mul(pow(self, exponent_ - 1), exponent_))};
  }
  SavedVariable self_{this};

 private:
  double exponent_;
};

// rsqrt(Tensor self)  self: -0.5 * grad * result.pow(3)
class RsqrtBackward0 final : public Node {
 public:
  explicit RsqrtBackward0(uint64_t seq) : Node("RsqrtBackward0", seq) {}
  GradList apply(GradList& grads) override {
    // ATen evaluates result.pow(3) before -0.5 * grad (right-to-left operands).
    const Tensor result = result_.unpack();
    Tensor cubed = pow(result, 3);
    return {mul(mul(grads[0], -0.5), cubed)};
  }
  SavedVariable result_{this};
};

// mul.Tensor(Tensor self, Tensor other)
//   self: mul_tensor_backward(grad, other, self.scalar_type())   -> saves other iff self needs grad
//   other: mul_tensor_backward(grad, self, other.scalar_type())  -> saves self iff other needs grad
class MulBackward0 final : public Node {
 public:
  explicit MulBackward0(uint64_t seq) : Node("MulBackward0", seq) {}
  GradList apply(GradList& grads) override {
    // As the generated node, every saved tensor is unpacked first.
    const Tensor other = other_.unpack();
    const Tensor self = self_.unpack();
    GradList out(2);
    if (should_compute_output(0)) out[0] = mul(grads[0], other);
    if (should_compute_output(1)) out[1] = mul(grads[0], self);
    return out;
  }
  SavedVariable other_{this};
  SavedVariable self_{this};
};

// mul.Scalar / div.Scalar: the gradient scaled by the same number; nothing saved.
class ScaleBackward final : public Node {
 public:
  ScaleBackward(uint64_t seq, std::string_view name, double factor) : Node(name, seq), factor_(factor) {}
  GradList apply(GradList& grads) override { return {mul(grads[0], factor_)}; }

 private:
  double factor_;
};

// add.Tensor(Tensor self, Tensor other, Scalar alpha)  self: grad; other: maybe_multiply(grad, alpha)
// With alpha 1 both are the incoming gradient itself: one tensor handed to two buffers.
class AddBackward0 final : public Node {
 public:
  explicit AddBackward0(uint64_t seq) : Node("AddBackward0", seq) {}
  GradList apply(GradList& grads) override {
    GradList out(next_edges().size());
    for (size_t i = 0; i < out.size(); ++i)
      if (should_compute_output(i)) out[i] = grads[0];
    return out;
  }
};

// neg(Tensor self)  self: grad.neg()
class NegBackward0 final : public Node {
 public:
  explicit NegBackward0(uint64_t seq) : Node("NegBackward0", seq) {}
  GradList apply(GradList& grads) override { return {neg(grads[0])}; }
};

// silu(Tensor self)  self: silu_backward(grad, self)  (grad mode is off in the backward)
class SiluBackward0 final : public Node {
 public:
  explicit SiluBackward0(uint64_t seq) : Node("SiluBackward0", seq) {}
  GradList apply(GradList& grads) override {
    const Tensor self = self_.unpack();
    return {silu_backward(grads[0], self)};
  }
  SavedVariable self_{this};
};

// relu(Tensor self)  self: threshold_backward(grad, result, 0)   -> saves result
class ReluBackward0 final : public Node {
 public:
  explicit ReluBackward0(uint64_t seq) : Node("ReluBackward0", seq) {}
  GradList apply(GradList& grads) override {
    const Tensor result = result_.unpack();
    Tensor out = elementwise_result(grads[0], result);
    dispatch<2, 1>(Op::kThresholdBackward, {grads[0], result}, {out});
    return {out};
  }
  SavedVariable result_{this};
};

// gelu(Tensor self, str approximate)  self: gelu_backward(grad, self, approximate)   -> saves self
class GeluBackward0 final : public Node {
 public:
  explicit GeluBackward0(uint64_t seq) : Node("GeluBackward0", seq) {}
  GradList apply(GradList& grads) override {
    const Tensor self = self_.unpack();
    Tensor out = elementwise_result(grads[0], self);
    dispatch<2, 1>(Op::kGeluBackward, {grads[0], self}, {out});
    return {out};
  }
  SavedVariable self_{this};
};

// clone(Tensor self)  self: grad
class CloneBackward0 final : public Node {
 public:
  explicit CloneBackward0(uint64_t seq) : Node("CloneBackward0", seq) {}
  GradList apply(GradList& grads) override { return {grads[0]}; }
};

Tensor unary(Op op, const Tensor& self) {
  Tensor out = elementwise_result(self, self.dtype());
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
    Tensor out = elementwise_result(grads[0], promote(grads[0].dtype(), result.dtype()));
    dispatch<2, 1>(Op::kSigmoidBackward, {grads[0], result}, {out});
    return {out};
  }
  SavedVariable result_{this};
};

// tanh(Tensor self)  self: tanh_backward(grad, result)   -> saves result
class TanhBackward0 final : public Node {
 public:
  explicit TanhBackward0(uint64_t seq) : Node("TanhBackward0", seq) {}
  GradList apply(GradList& grads) override {
    const Tensor result = result_.unpack();
    Tensor out = elementwise_result(grads[0], promote(grads[0].dtype(), result.dtype()));
    dispatch<2, 1>(Op::kTanhBackward, {grads[0], result}, {out});
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
    Tensor out = elementwise_result(grads[0], promote(grads[0].dtype(), self.dtype()));
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

Tensor to(const Tensor& self, DType dtype) {
  if (self.dtype() == dtype) return self;
  auto node = make_node<ToCopyBackward0>({&self}, self.dtype());
  Tensor out = alloc(self.sizes(), internal::dense_strides_like(self, self.sizes()), dtype);
  dispatch<1, 1>(Op::kToCopy, {self}, {out});
  set_history(out, node);
  return out;
}

Tensor pow(const Tensor& self, double exponent) {
  if (const autocast::Wrap cast; cast) return pow(cast.fp32(self), exponent);
  auto node = make_node<PowBackward0>({&self}, exponent);
  if (node) node->self_.save(self);
  Tensor out = unary(Op::kPowTensorScalar, self);
  set_history(out, node);
  return out;
}

Tensor rsqrt(const Tensor& self) {
  if (const autocast::Wrap cast; cast) return rsqrt(cast.fp32(self));
  auto node = make_node<RsqrtBackward0>({&self});
  Tensor out = unary(Op::kRsqrt, self);
  set_history(out, node);
  if (node) node->result_.save(out, /*is_output=*/true);
  return out;
}

Tensor mul(const Tensor& self, const Tensor& other) {
  auto node = make_node<MulBackward0>({&self, &other});
  if (node) {
    if (node->should_compute_output(0)) node->other_.save(other);
    if (node->should_compute_output(1)) node->self_.save(self);
  }
  Tensor out = elementwise_result(self, other);
  dispatch<2, 1>(Op::kMulTensor, {self, other}, {out});
  set_history(out, node);
  return out;
}

Tensor mul(const Tensor& self, double other) {
  auto node = make_node<ScaleBackward>({&self}, "MulBackward1", other);
  Tensor out = unary(Op::kMulScalar, self);
  set_history(out, node);
  return out;
}

Tensor mul_number(const Tensor& self, double other) {
  auto node = make_node<ScaleBackward>({&self}, "MulBackward0", other);
  Tensor out = unary(Op::kMulTensor, self);
  set_history(out, node);
  return out;
}

Tensor div(const Tensor& self, double other) {
  auto node = make_node<ScaleBackward>({&self}, "DivBackward1", 1.0 / other);
  Tensor out = unary(Op::kDivScalar, self);
  set_history(out, node);
  return out;
}

Tensor add(const Tensor& self, const Tensor& other) {
  auto node = make_node<AddBackward0>({&self, &other});
  Tensor out = elementwise_result(self, other);
  dispatch<2, 1>(Op::kAddTensor, {self, other}, {out});
  set_history(out, node);
  return out;
}

Tensor add(const Tensor& self, double /*other*/) {
  auto node = make_node<AddBackward0>({&self});
  Tensor out = unary(Op::kAddTensor, self);
  set_history(out, node);
  return out;
}

// sub.Tensor(self, other, alpha) with a wrapped number: self's gradient is grad, as add's (other needs none).
Tensor sub(const Tensor& self, double /*other*/) {
  auto node = make_node<AddBackward0>({&self});
  Tensor out = unary(Op::kSub, self);
  set_history(out, node);
  return out;
}

Tensor& mul_(Tensor& self, const Tensor& other) {
  // As mul.Tensor's node; self's old value, which other's gradient needs, is cloned before it changes.
  auto node = make_node<MulBackward0>({&self, &other});
  if (node) {
    if (node->should_compute_output(0)) node->other_.save(other);
    if (node->should_compute_output(1)) node->self_.save(clone(self.detach()));
  }
  dispatch<2, 1>(Op::kMulInplace, {self, other}, {self});
  set_history(self, node);
  return self;
}

Tensor& add_(Tensor& self, const Tensor& other) {
  auto node = make_node<AddBackward0>({&self, &other});
  dispatch<2, 1>(Op::kAddInplace, {self, other}, {self});
  set_history(self, node);
  return self;
}

Tensor neg(const Tensor& self) {
  auto node = make_node<NegBackward0>({&self});
  Tensor out = unary(Op::kNeg, self);
  set_history(out, node);
  return out;
}

Tensor silu(const Tensor& self) {
  auto node = make_node<SiluBackward0>({&self});
  if (node) node->self_.save(self);
  Tensor out = unary(Op::kSilu, self);
  set_history(out, node);
  return out;
}

Tensor silu_backward(const Tensor& grad, const Tensor& self) {
  Tensor out = elementwise_result(grad, self);
  dispatch<2, 1>(Op::kSiluBackward, {grad, self}, {out});
  return out;
}

Tensor relu(const Tensor& self) {
  auto node = make_node<ReluBackward0>({&self});
  Tensor out = unary(Op::kRelu, self);
  set_history(out, node);
  if (node) node->result_.save(out, /*is_output=*/true);
  return out;
}

Tensor gelu_tanh(const Tensor& self) {
  auto node = make_node<GeluBackward0>({&self});
  if (node) node->self_.save(self);
  Tensor out = unary(Op::kGelu, self);
  set_history(out, node);
  return out;
}

// cos and sin run only in the rotary embedding, under no_grad: they record no node.
Tensor cos(const Tensor& self) { return unary(Op::kCos, self); }
Tensor sin(const Tensor& self) { return unary(Op::kSin, self); }

Tensor clone(const Tensor& self) {
  auto node = make_node<CloneBackward0>({&self});
  Tensor out = alloc(self.sizes(), internal::dense_strides_like(self, self.sizes()), self.dtype());
  dispatch<1, 1>(Op::kClone, {self}, {out});
  set_history(out, node);
  return out;
}

Tensor clone_contiguous(const Tensor& self) {
  auto node = make_node<CloneBackward0>({&self});
  Tensor out = alloc(self.sizes(), self.dtype());
  dispatch<1, 1>(Op::kClone, {self}, {out});
  set_history(out, node);
  return out;
}

Tensor& copy_(Tensor& self, const Tensor& src) {
  dispatch<2, 1>(Op::kCopyInplace, {self, src}, {self});
  return self;
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
  if (const autocast::Wrap cast; cast) return exp(cast.fp32(self));
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

Tensor tanh(const Tensor& self) {
  auto node = make_node<TanhBackward0>({&self});
  Tensor out = unary(Op::kTanh, self);
  set_history(out, node);
  if (node) node->result_.save(out, /*is_output=*/true);
  return out;
}

Tensor softplus(const Tensor& self) {
  if (const autocast::Wrap cast; cast) return softplus(cast.fp32(self));
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
  if (const autocast::Wrap cast; cast) return cumsum(self, dim, dtype ? dtype : cast.opt_dtype(self));
  auto node = make_node<CumsumBackward0>({&self}, wrap_dim(dim, self.dim()), self.dtype());
  Tensor out = elementwise_result(self, dtype.value_or(self.dtype()));
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
