// torchao's FP8 training (pytorch/ao 36027d82d, torchao/float8/): Float8Linear's autograd function
// matmul_with_hp_or_float8_args, the dynamic casts it takes (float8_scaling_utils.hp_tensor_to_float8_dynamic,
// float8_utils.tensor_to_scale, float8_training_tensor._ToFloat8ConstrFunc) and the scaled matrix product its
// Float8TrainingTensor runs (float8_ops.float8_mm: preprocess_addmm, addmm_float8_unwrapped), in eager mode,
// statement by statement: each temporary made and freed where the Python makes and drops it.
#include "ops/internal.h"
#include "ops/ops.h"

namespace census::ops {
using internal::alloc;
using internal::alloc_like;
using internal::dispatch;

namespace {

enum class Granularity : uint8_t { kTensorwise, kAxiswise };

// A CastConfig: whether it casts (ScalingType.DYNAMIC) or keeps the high-precision tensor (DISABLED), how
// finely it scales, and to which float8 type.
struct CastConfig {
  bool cast = true;
  Granularity granularity = Granularity::kTensorwise;
  DType target = DType::kFloat8E4M3;
};

// Float8LinearConfig.from_recipe_name, after its __post_init__: the six casts, whether the scales are
// rounded down to powers of two, and each product's use_fast_accum (gemm_config_output's True, the two
// backward products' False).
struct Float8LinearConfig {
  CastConfig input, input_for_grad_weight, weight, weight_for_grad_input, grad_output, grad_output_for_grad_weight;
  bool round_scales_to_power_of_2 = false;
};

Float8LinearConfig config_of(Float8Recipe recipe) {
  Float8LinearConfig c;
  const CastConfig e4m3_axiswise{true, Granularity::kAxiswise, DType::kFloat8E4M3};
  switch (recipe) {
    case Float8Recipe::kTensorwise:  // Float8LinearConfig(): e4m3 input and weight, e5m2 gradients
      c.input = c.input_for_grad_weight = c.weight = c.weight_for_grad_input = CastConfig{};
      c.grad_output = c.grad_output_for_grad_weight = CastConfig{true, Granularity::kTensorwise, DType::kFloat8E5M2};
      break;
    case Float8Recipe::kRowwise:
      c.input = c.input_for_grad_weight = c.weight = c.weight_for_grad_input = c.grad_output =
          c.grad_output_for_grad_weight = e4m3_axiswise;
      c.round_scales_to_power_of_2 = true;
      break;
    case Float8Recipe::kRowwiseWithGwHp:
      c.input = c.weight = c.grad_output = e4m3_axiswise;
      c.weight_for_grad_input = CastConfig{};
      c.input_for_grad_weight = c.grad_output_for_grad_weight = CastConfig{false, Granularity::kTensorwise, DType::kFloat8E4M3};
      c.round_scales_to_power_of_2 = true;
      break;
  }
  return c;
}

// The roles choose_scaled_mm_config pairs: the output's product (input x weight) accumulates fast, the
// gradients' two do not.
enum class Product : uint8_t { kOutput, kGradInput, kGradWeight };

// A Float8TrainingTensor: its fp8 data and fp32 scale (a 0-d tensor tensorwise, (rows, 1) or (1, cols)
// axiswise), and the dimension it was scaled across (axiswise_dim; none tensorwise).
struct Float8Tensor {
  Tensor data;
  Tensor scale;
  std::optional<int> axiswise_dim;
  ~Float8Tensor() { data = Tensor(); }  // the wrapper's data goes before its scale
};

// The ops of the casts, under no_grad (an autograd.Function's forward and backward run without autograd).
Tensor unary_op(Op op, const Tensor& self) {
  Tensor out = alloc_like(self, self.dtype());
  dispatch<1, 1>(op, {self}, {out});
  return out;
}

Tensor max_all(const Tensor& self) {
  Tensor out = alloc(Dims{}, self.dtype());
  dispatch<1, 1>(Op::kMax, {self}, {out});
  return out;
}

Tensor amax_keepdim(const Tensor& self, int dim) {
  Dims sizes = self.sizes();
  sizes[wrap_dim(dim, self.dim())] = 1;
  Tensor out = alloc(sizes, self.dtype());
  dispatch<1, 1>(Op::kAmax, {self}, {out});
  return out;
}

Tensor new_ones_scalar(const Tensor& like) {
  Tensor out = alloc(Dims{}, like.dtype());
  dispatch<1, 1>(Op::kNewOnes, {like}, {out});
  return out;
}

Tensor contiguous_copy(const Tensor& self) {
  if (self.is_contiguous()) return self;
  Tensor out = alloc(self.sizes(), self.dtype());
  dispatch<1, 1>(Op::kContiguous, {self}, {out});
  return out;
}

// torch.finfo(float8_dtype).max.
double float8_max(DType float8) { return float8 == DType::kFloat8E5M2 ? 57344.0 : 448.0; }

// float8_utils.is_row_major: stride[0] > stride[1] and stride[1] == 1.
bool is_row_major(const Tensor& t) { return t.stride(0) > t.stride(1) && t.stride(1) == 1; }

// A tensorwise (0-d) scale repeated n times (Tensor.repeat(n): one dimension of n).
Tensor repeat_scalar(const Tensor& scale, int64_t n) {
  Tensor out = alloc(Dims{n}, scale.dtype());
  dispatch<1, 1>(Op::kRepeat, {scale}, {out});
  return out;
}

// float8_utils.amax_to_scale: float8 max / clamp(amax in fp64, min=EPS) (a reciprocal, then a product),
// in fp32; rounded down to a power of two (exp2(floor(log2))) where the recipe asks.
Tensor amax_to_scale(const Tensor& amax_in, DType float8, bool round_scales_to_power_of_2) {
  const Tensor amax = to(amax_in, DType::kFloat64);
  Tensor res;
  {
    const Tensor clamped = clamp(amax, 1e-12, std::nullopt);
    const Tensor reciprocal = unary_op(Op::kReciprocal, clamped);  // Tensor.__rtruediv__: reciprocal() * other
    res = mul_number(reciprocal, float8_max(float8));
  }
  res = to(res, DType::kFloat32);
  if (round_scales_to_power_of_2) {
    Tensor log2 = unary_op(Op::kLog2, res);
    Tensor floored = unary_op(Op::kFloor, log2);
    log2 = Tensor();
    Tensor exp2 = unary_op(Op::kExp2, floored);
    floored = Tensor();
    res = std::move(exp2);
  }
  return res;
}

// hp_tensor_to_float8_dynamic: the scale from max(abs(x)) (tensorwise) or amax(abs(x), dim, keepdim)
// (axiswise), then _ToFloat8ConstrFunc: x.to(fp32) * scale, clamped to the float8 range, cast. The scaled and
// clamped fp32 copies live until the cast is made (the caller's tensor_scaled, to_fp8_saturated's x).
Float8Tensor to_float8(const Tensor& hp, const CastConfig& cast, std::optional<int> axiswise_dim, bool round_pow2) {
  Float8Tensor out;
  out.axiswise_dim = cast.granularity == Granularity::kAxiswise ? axiswise_dim : std::nullopt;
  {
    Tensor amax;
    {
      const Tensor absolute = unary_op(Op::kAbs, hp);
      amax = out.axiswise_dim ? amax_keepdim(absolute, *out.axiswise_dim) : max_all(absolute);
    }
    out.scale = amax_to_scale(amax, cast.target, round_pow2);
  }
  Tensor scaled;
  {
    const Tensor high = to(hp, DType::kFloat32);
    scaled = mul(high, out.scale);
  }
  {
    const Tensor clamped = clamp(scaled, -float8_max(cast.target), float8_max(cast.target));
    out.data = to(clamped, cast.target);
  }
  return out;
}

// Float8TrainingTensor's t(): its data transposed, and its scale where it has two dimensions.
Float8Tensor transposed(const Float8Tensor& x) {
  Float8Tensor out{t(x.data), x.scale.dim() > 1 ? t(x.scale) : x.scale, std::nullopt};
  if (x.axiswise_dim) out.axiswise_dim = *x.axiswise_dim == 0 ? -1 : 0;
  return out;
}

// Its reshape(-1, cols) (float8_view): the data viewed, an axiswise scale viewed to (rows, 1) or (1, cols).
Float8Tensor rows_of(const Float8Tensor& x) {
  const int64_t cols = x.data.size(-1);
  Float8Tensor out{view(x.data, Dims{x.data.numel() / cols, cols}), x.scale, x.axiswise_dim};
  if (x.scale.dim() >= 2)
    out.scale = view(x.scale, *x.axiswise_dim == 0 ? Dims{1, cols} : Dims{x.data.numel() / cols, 1});
  if (x.axiswise_dim && *x.axiswise_dim != 0) out.axiswise_dim = -1;
  return out;
}

// float8_mm: preprocess_addmm (a made row-major, b column-major, a tensorwise scale repeated where the other
// operand's is axiswise), then addmm_float8_unwrapped: the scales' reciprocals; for two axiswise operands
// without fast accumulation, their outer product applied after a tensorwise _scaled_mm (its scales ones).
Tensor float8_mm(const Float8Tensor& a, const Float8Tensor& b, DType out_dtype, bool use_fast_accum) {
  Tensor a_data = a.data;
  Tensor a_scale = a.scale;
  Tensor b_data = b.data;
  if (!is_row_major(a_data)) a_data = contiguous_copy(a_data);
  if (is_row_major(b_data)) b_data = t(contiguous_copy(t(b_data)));
  Tensor b_scale = b.scale;
  if (!a.axiswise_dim && b.axiswise_dim)
    a_scale = view(repeat_scalar(a_scale, a_data.size(0)), Dims{a_data.size(0), 1});
  else if (a.axiswise_dim && !b.axiswise_dim)
    b_scale = view(repeat_scalar(b_scale, b_data.size(1)), Dims{1, b_data.size(1)});
  Tensor a_inverse_scale = unary_op(Op::kReciprocal, a_scale);
  Tensor b_inverse_scale = unary_op(Op::kReciprocal, b_scale);
  Tensor post_inverse_scale;
  const bool rowwise = a_scale.dim() == 2 && a_scale.size(0) == a_data.size(0) && a_scale.size(1) == 1 &&
                       b_scale.dim() == 2 && b_scale.size(0) == 1 && b_scale.size(1) == b_data.size(1);
  if (rowwise && !use_fast_accum) {
    post_inverse_scale = mul(a_inverse_scale, b_inverse_scale);
    a_inverse_scale = new_ones_scalar(a_inverse_scale);
    b_inverse_scale = new_ones_scalar(a_inverse_scale);
  }
  const std::array<Tensor, 4> inputs{a_data, b_data, a_inverse_scale, b_inverse_scale};
  Tensor output = internal::run_op(Op::kScaledMm, inputs, [&] {  // a checkpoint's policy may answer it
    return alloc(Dims{a_data.size(0), b_data.size(1)}, out_dtype);
  });
  if (post_inverse_scale.defined()) dispatch<2, 1>(Op::kMulInplace, {output, post_inverse_scale}, {output});
  // The locals go in reverse order as it returns, as CPython drops them: addmm_float8_unwrapped's (the outer
  // product first), then preprocess_addmm's copies.
  return output;
}

// A cast of `hp` by `cast`, or none where the config keeps it in high precision.
struct MaybeFloat8 {
  Tensor hp;
  Float8Tensor fp8;
  bool cast = false;
};

MaybeFloat8 maybe_float8(const Tensor& hp, const CastConfig& cast, int axiswise_dim, bool round_pow2) {
  MaybeFloat8 out;
  if (!cast.cast) {
    out.hp = hp;
    return out;
  }
  out.fp8 = to_float8(hp, cast, axiswise_dim, round_pow2);
  out.cast = true;
  return out;
}

// matmul_with_hp_or_float8_args: saves the high-precision input and the weight's transpose.
class MatmulWithHpOrFloat8ArgsBackward final : public Node {
 public:
  MatmulWithHpOrFloat8ArgsBackward(uint64_t seq, Float8Recipe recipe)
      : Node("matmul_with_hp_or_float8_argsBackward", seq), config_(config_of(recipe)) {}
  GradList apply(GradList& grads) override {
    NoGradGuard no_grad;
    const Tensor input_hp = input_hp_.unpack();
    const Tensor weight_hp_t = weight_hp_t_.unpack();
    const Float8LinearConfig& c = config_;
    const Tensor& grad_output = grads[0];
    const Dims grad_output_orig_shape = grad_output.sizes();
    const Tensor grad_output_reshaped = reshape(grad_output, Dims{grad_output.numel() / grad_output.size(-1), grad_output.size(-1)});
    // grad_input = grad_output @ weight_t.t(), both cast
    // (every recipe casts both: only the grad_weight product keeps high precision, rowwise_with_gw_hp's)
    const Float8Tensor grad_output_dim0 = to_float8(grad_output_reshaped, c.grad_output, -1, c.round_scales_to_power_of_2);
    const Float8Tensor weight_t_dim0 = to_float8(weight_hp_t, c.weight_for_grad_input, -1, c.round_scales_to_power_of_2);
    Tensor grad_input = float8_mm(grad_output_dim0, transposed(weight_t_dim0), grad_output.dtype(),
                                  /*use_fast_accum=*/false);
    Dims input_shape = grad_output_orig_shape;
    input_shape[input_shape.size() - 1] = grad_input.size(-1);
    grad_input = reshape(grad_input, input_shape);
    const Tensor input_hp_reshaped = reshape(input_hp, Dims{input_hp.numel() / input_hp.size(-1), input_hp.size(-1)});
    // grad_weight = grad_output.t() @ input, cast, or in high precision where the recipe keeps them so
    MaybeFloat8 grad_output_dim1 =
        maybe_float8(grad_output_reshaped, c.grad_output_for_grad_weight, 0, c.round_scales_to_power_of_2);
    MaybeFloat8 input_dim1 = maybe_float8(input_hp_reshaped, c.input_for_grad_weight, 0, c.round_scales_to_power_of_2);
    Tensor grad_weight = grad_output_dim1.cast
                             ? float8_mm(transposed(grad_output_dim1.fp8), input_dim1.fp8, grad_output.dtype(),
                                         /*use_fast_accum=*/false)
                             : mm(t(grad_output_dim1.hp), input_dim1.hp);
    GradList out(2);
    out[0] = std::move(grad_input);
    out[1] = t(grad_weight);
    return out;
  }
  SavedVariable input_hp_{this};
  SavedVariable weight_hp_t_{this};

 private:
  Float8LinearConfig config_;
};

}  // namespace

Tensor float8_linear(const Tensor& input, const Tensor& weight, const Tensor& bias, Float8Recipe recipe) {
  const Tensor weight_hp_t = t(weight);  // self.weight.t(), outside the function
  auto node = make_node<MatmulWithHpOrFloat8ArgsBackward>({&input, &weight_hp_t}, recipe);
  Tensor output;
  {
    NoGradGuard no_grad;
    if (node) {
      node->input_hp_.save(input);
      node->weight_hp_t_.save(weight_hp_t);
    }
    const Float8LinearConfig c = config_of(recipe);
    const Float8Tensor input_fp8 = to_float8(input, c.input, -1, c.round_scales_to_power_of_2);
    const Float8Tensor weight_fp8_t = to_float8(weight_hp_t, c.weight, 0, c.round_scales_to_power_of_2);
    const Float8Tensor input_fp8_reshaped = rows_of(input_fp8);
    Tensor res_bits = float8_mm(input_fp8_reshaped, weight_fp8_t, input.dtype(), /*use_fast_accum=*/true);
    Dims shape = input.sizes();
    shape[shape.size() - 1] = res_bits.size(-1);
    output = view(res_bits, shape);
    // The forward's locals go in reverse order as it returns: the weight's cast, then the input's.
  }
  set_history(output, node);
  if (bias.defined()) output = add(output, to(bias, output.dtype()));
  return output;
}

}  // namespace census::ops
