// bitsandbytes' 4-bit matrix product (bitsandbytes-foundation/bitsandbytes, autograd/_functions.py matmul_4bit
// and MatMul4Bit, functional.py dequantize_4bit, backends/cuda/ops.py gemm_4bit), as each release line runs it
// on CUDA, statement by statement: each dequantized copy made and freed where the Python makes and drops it.
//   - 0.49 (tag 0.49.2): MatMul4Bit.forward runs F.linear(A, dequantize_4bit(B, state).to(A.dtype).t(), bias):
//     the whole (out, in) weight in the state's dtype, and a copy in A's where they differ;
//   - 0.50 (tags 0.50.0, 0.50.1): one op, gemm_4bit. CUDA's kernel runs its fused product up to 1536 rows
//     (_gemm_4bit_custom_max_m) where the inner dimension is a multiple of the block, else
//     _dequant_linear_fallback: an fp32 absmax (double quantization), its sum with the offset, the dequantized
//     weight in A's dtype, F.linear. Below 1536 rows its per-architecture heuristic (_gemm_4bit_use_custom_cuda)
//     picks the fallback for some shapes too (H100 and B200 chiefly); Census prices the fused kernel there.
//   - the backward, both: grad_A = grad_output @ dequantize_4bit(B, state).to(grad_output.dtype), the absmax
//     dequantized first where nested (dequantize_blockwise, then += offset in place). The weight has no
//     gradient (bitsandbytes computes none); the input is not saved.
#include "ops/internal.h"
#include "ops/ops.h"

namespace census::ops {
using internal::alloc;
using internal::dispatch;

namespace {

// functional.dequantize_4bit(B, state): the absmax first where nested (dequantize_blockwise, += offset), then
// the (out, in) weight in the state's dtype. The absmax goes as it returns.
Tensor dequantize_4bit(const Tensor& packed, const QuantState4bit& state) {
  Tensor absmax = state.absmax;
  if (state.nested()) {
    absmax = alloc(state.absmax.sizes(), DType::kFloat32);
    dispatch<3, 1>(Op::kBnbDequantizeBlockwise, {state.absmax, state.state2_absmax, state.state2_code}, {absmax});
    dispatch<2, 1>(Op::kAddInplace, {absmax, state.offset}, {absmax});
  }
  Tensor out = alloc(state.shape, state.dtype);
  dispatch<2, 1>(Op::kBnbDequantize4bit, {packed, absmax}, {out});
  return out;
}

// _dequant_linear_fallback: its buffers made before the dequantization kernels write them, then F.linear.
Tensor dequant_linear_fallback(const Tensor& a, const Tensor& bias, const QuantState4bit& state) {
  Tensor absmax_dq, absmax;
  if (state.nested()) {
    absmax_dq = alloc(state.absmax.sizes(), DType::kFloat32);  // torch.empty_like(absmax_8bit, dtype=float32)
    dispatch<1, 1>(Op::kEmptyLike, {state.absmax}, {absmax_dq});
    absmax = add(absmax_dq, state.offset);
  }
  Tensor b_dq = empty(state.shape, a.dtype());
  return linear(a, b_dq, bias);
}

// gemm_4bit as CUDA dispatches it (0.50).
Tensor gemm_4bit(const Tensor& a, const Tensor& packed, const Tensor& bias, const QuantState4bit& state) {
  const int64_t k = a.size(-1);
  const int64_t m = a.numel() / k;
  if (m > 1536 || k % state.blocksize != 0) return dequant_linear_fallback(a, bias, state);
  Dims sizes = a.sizes();
  sizes[sizes.size() - 1] = state.shape[0];
  const auto make = [&] { return alloc(sizes, a.dtype()); };  // a checkpoint's policy may answer it
  if (bias.defined()) return internal::run_op(Op::kBnbGemm4bit, std::array<Tensor, 3>{a, packed, bias}, make);
  return internal::run_op(Op::kBnbGemm4bit, std::array<Tensor, 2>{a, packed}, make);
}

class MatMul4BitBackward final : public Node {
 public:
  MatMul4BitBackward(uint64_t seq, const QuantState4bit& state) : Node("MatMul4BitBackward", seq), state_(state) {}
  GradList apply(GradList& grads) override {
    NoGradGuard no_grad;
    const Tensor packed = packed_.unpack();
    const Tensor& grad_output = grads[0];
    GradList out(1);
    if (should_compute_output(0)) {
      const Tensor weight = to(dequantize_4bit(packed, state_), grad_output.dtype());
      out[0] = matmul(grad_output, weight);
    }
    return out;
  }
  SavedVariable packed_{this};  // ctx.tensors = (None, B): the parameter itself

 private:
  QuantState4bit state_;
};

}  // namespace

Tensor bnb_dequantize_4bit(const Tensor& packed, const QuantState4bit& state) { return dequantize_4bit(packed, state); }

namespace {
thread_local int g_inside_matmul_4bit = 0;
}  // namespace

bool inside_matmul_4bit() { return g_inside_matmul_4bit > 0; }

Tensor bnb_matmul_4bit(const Tensor& input, const Tensor& packed, const Tensor& bias, const QuantState4bit& state,
                       BnbVersion version) {
  // A frozen bias: no gradient reaches it (the step's bases are frozen).
  auto node = make_node<MatMul4BitBackward>({&input}, state);
  Tensor output;
  {
    NoGradGuard no_grad;
    ++g_inside_matmul_4bit;
    if (node) node->packed_.save(packed);
    if (version == BnbVersion::k0_49) {
      const Tensor weight = to(dequantize_4bit(packed, state), input.dtype());
      output = linear(input, weight, bias);
    } else {
      output = gemm_4bit(input, packed, bias, state);
    }
    --g_inside_matmul_4bit;
  }
  set_history(output, node);
  return output;
}

}  // namespace census::ops
