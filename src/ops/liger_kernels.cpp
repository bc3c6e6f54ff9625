// Liger's RMSNorm, SwiGLU, GeGLU and RoPE functions (linkedin/Liger-Kernel ead96b6, src/liger_kernel/ops/
// rms_norm.py, swiglu.py, geglu.py, rope.py): each a torch.autograd.Function whose Python makes the buffers
// and whose Triton kernel writes into them, allocating nothing itself. Each kernel dispatches here as one op
// with the tensors it reads and writes; every byte comes from the Python around it, statement by statement.
#include "ops/internal.h"
#include "ops/ops.h"

namespace census::ops {
using internal::dispatch;

namespace {

// (rows, cols) of a tensor viewed as X.view(-1, dim).
Dims rows_of(const Tensor& x) { return Dims{x.numel() / x.size(-1), x.size(-1)}; }

// LigerRMSNormFunction (casting modes _CASTING_MODE_LLAMA and _GEMMA, any offset): saves X, W and RSTD.
class LigerRMSNormFunctionBackward final : public Node {
 public:
  LigerRMSNormFunctionBackward(uint64_t seq, int64_t sm_count, bool in_place)
      : Node("LigerRMSNormFunctionBackward", seq), sm_count_(sm_count), in_place_(in_place) {}
  GradList apply(GradList& grads) override {
    const Tensor x = x_.unpack();
    const Tensor weight = weight_.unpack();
    const Tensor rstd = rstd_.unpack();
    // @ensure_contiguous, then rms_norm_backward: dY.view(-1, dim); _dW = empty((sm_count, n_cols), fp32);
    // dX = dY where in_place, else zeros_like(dY); the kernel writes dX and each program's share of dW into
    // _dW's rows.
    const Tensor dy = contiguous(grads[0]);
    const Dims shape = dy.sizes();
    const Tensor dy_rows = view(dy, rows_of(dy));
    Tensor dw_partial = empty(Dims{sm_count_, dy_rows.size(1)}, DType::kFloat32);
    const Tensor dx_rows = in_place_ ? dy_rows : zeros_like(dy_rows);
    dispatch<4, 2>(Op::kLigerRmsNormBackward, {dy_rows, x, weight, rstd}, {dx_rows, dw_partial});
    GradList out(2);
    out[0] = view(dx_rows, shape);
    // dW = _dW.sum(dim=0).to(W.dtype); _dW goes as rms_norm_backward returns.
    out[1] = to(sum(dw_partial, {0}, /*keepdim=*/false), weight.dtype());
    dw_partial = Tensor();
    return out;
  }
  SavedVariable x_{this};
  SavedVariable weight_{this};
  SavedVariable rstd_{this};

 private:
  int64_t sm_count_;
  bool in_place_;
};

// LigerSiLUMulFunction and LigerGELUMulFunction (ops/swiglu.py, ops/geglu.py): saves a and b, whose storages
// its backward's kernel overwrites with da and db.
class LigerGatedMulBackward final : public Node {
 public:
  LigerGatedMulBackward(uint64_t seq, bool gelu)
      : Node(gelu ? "LigerGELUMulFunctionBackward" : "LigerSiLUMulFunctionBackward", seq),
        kernel_(gelu ? Op::kLigerGegluBackward : Op::kLigerSwigluBackward) {}
  GradList apply(GradList& grads) override {
    const Tensor a = a_.unpack();
    const Tensor b = b_.unpack();
    // @ensure_contiguous, then swiglu_backward: dc.view(-1, n_cols); the kernel writes da into a and db into
    // b, which return as a.view(*ori_shape) and b.view(*ori_shape): no gradient is allocated.
    const Tensor dc = contiguous(grads[0]);
    const Dims shape = dc.sizes();
    const Tensor dc_rows = view(dc, rows_of(dc));
    dispatch<3, 2>(kernel_, {dc_rows, a, b}, {a, b});
    GradList out(2);
    out[0] = view(a, shape);
    out[1] = view(b, shape);
    return out;
  }
  SavedVariable a_{this};
  SavedVariable b_{this};

 private:
  Op kernel_;
};

// swiglu_forward and geglu_forward: @ensure_contiguous, a and b viewed (-1, n_cols), c = empty_like(a).
Tensor gated_mul(const Tensor& a, const Tensor& b, bool gelu) {
  auto node = make_node<LigerGatedMulBackward>({&a, &b}, gelu);
  Tensor c;
  {
    NoGradGuard no_grad;
    const Tensor a_rows = view(contiguous(a), rows_of(a));
    const Tensor b_rows = view(contiguous(b), rows_of(b));
    const Tensor c_rows = empty_like(a_rows);
    dispatch<2, 1>(gelu ? Op::kLigerGegluForward : Op::kLigerSwigluForward, {a_rows, b_rows}, {c_rows});
    c = view(c_rows, a.sizes());
    if (node) {
      node->a_.save(a_rows);
      node->b_.save(b_rows);
    }
  }
  set_history(c, node);
  return c;
}

// LigerRopeFunction: saves cos and sin; q and k are rotated in place.
class LigerRopeFunctionBackward final : public Node {
 public:
  explicit LigerRopeFunctionBackward(uint64_t seq) : Node("LigerRopeFunctionBackward", seq) {
    set_num_inputs(2);
  }
  GradList apply(GradList& grads) override {
    // The Function's node materializes the gradient of an output nothing used: zeros of its shape.
    for (size_t i = 0; i < 2; ++i)
      if (!grads[i].defined()) grads[i] = zeros(output_sizes_[i], dtype_);
    const Tensor cos = cos_.unpack();
    const Tensor sin = sin_.unpack();
    // rope_backward: dq.transpose(1, 2).contiguous() (a copy where the gradient is not laid out (B, S, N, D)),
    // the same for dk, rotated back in place, returned transposed to (B, N, S, D).
    const Tensor dq = contiguous(transpose(grads[0], 1, 2));
    const Tensor dk = contiguous(transpose(grads[1], 1, 2));
    dispatch<4, 2>(Op::kLigerRopeBackward, {dq, dk, cos, sin}, {dq, dk});
    GradList out(2);
    out[0] = transpose(dq, 1, 2);
    out[1] = transpose(dk, 1, 2);
    return out;
  }
  SavedVariable cos_{this};
  SavedVariable sin_{this};
  Dims output_sizes_[2];
  DType dtype_ = DType::kBFloat16;
};

}  // namespace

Tensor liger_rms_norm(const Tensor& hidden_states, const Tensor& weight, int64_t sm_count, bool in_place) {
  auto node = make_node<LigerRMSNormFunctionBackward>({&hidden_states, &weight}, sm_count, in_place);
  Tensor y;
  {
    NoGradGuard no_grad;  // an autograd.Function's forward
    // @ensure_contiguous, then rms_norm_forward: X.view(-1, dim); Y = empty((n_rows, n_cols), X.dtype);
    // RSTD = empty(n_rows) in fp32, as both casting modes Liger's patches use keep it.
    const Tensor x = view(contiguous(hidden_states), rows_of(hidden_states));
    const Tensor y_rows = empty(x.sizes(), x.dtype());
    const Tensor rstd = empty(Dims{x.size(0)}, DType::kFloat32);
    dispatch<2, 2>(Op::kLigerRmsNormForward, {x, weight}, {y_rows, rstd});
    y = view(y_rows, hidden_states.sizes());
    if (node) {
      node->x_.save(x);
      node->weight_.save(weight);
      node->rstd_.save(rstd);
    }
  }
  set_history(y, node);
  return y;
}

Tensor liger_silu_mul(const Tensor& a, const Tensor& b) { return gated_mul(a, b, /*gelu=*/false); }

Tensor liger_gelu_mul(const Tensor& a, const Tensor& b) { return gated_mul(a, b, /*gelu=*/true); }

std::pair<Tensor, Tensor> liger_rope(const Tensor& q, const Tensor& k, const Tensor& cos, const Tensor& sin) {
  auto node = make_node<LigerRopeFunctionBackward>({&q, &k});
  Tensor q_out, k_out;
  {
    NoGradGuard no_grad;
    // rope_forward: q.transpose(1, 2).contiguous() (a no-op for Transformers' view(...).transpose(1, 2)), the
    // same for k, cos and sin; the kernel rotates q and k in place; both return transposed back.
    const Tensor q_rows = contiguous(transpose(q, 1, 2));
    const Tensor k_rows = contiguous(transpose(k, 1, 2));
    const Tensor cos_c = contiguous(cos);
    const Tensor sin_c = contiguous(sin);
    dispatch<4, 2>(Op::kLigerRopeForward, {q_rows, k_rows, cos_c, sin_c}, {q_rows, k_rows});
    q_out = transpose(q_rows, 1, 2);
    k_out = transpose(k_rows, 1, 2);
    if (node) {
      node->cos_.save(cos_c);
      node->sin_.save(sin_c);
      node->output_sizes_[0] = q_out.sizes();
      node->output_sizes_[1] = k_out.sizes();
      node->dtype_ = q.dtype();
    }
  }
  set_history(q_out, node, 0);
  set_history(k_out, node, 1);
  return {q_out, k_out};
}

}  // namespace census::ops
