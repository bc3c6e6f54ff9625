// File: ops.h
// The ops a census runs, as ATen functions on shape-only tensors. Each allocates what its ATen kernel
// allocates, records the autograd node derivatives.yaml gives it (saving what the formula names, under
// the condition the codegen puts on it), and dispatches to the Session's observers. Composite ops
// (linear, matmul, reshape, softmax) decompose as ATen decomposes them, so the nodes and storages are
// PyTorch's.
//
// Legend: S = seq_length, H = hidden_size; shapes in comments are (dims) dtype.
#pragma once

#include <functional>
#include <initializer_list>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "ops/op_def.h"
#include "tensor/tensor.h"

namespace census::ops {

// --- Factories (no node) ---
Tensor empty(const Dims& sizes, DType dtype);
Tensor empty_like(const Tensor& self);  // keeps self's strides when dense, as preserve_format does
Tensor new_zeros(const Tensor& self, const Dims& sizes);
Tensor new_zeros(const Tensor& self, const Dims& sizes, DType dtype);
Tensor new_empty(const Tensor& self, const Dims& sizes);
Tensor arange(int64_t end, DType dtype = DType::kInt64);
// host.to("cuda", non_blocking=True) of a contiguous pinned host tensor of `host_sizes` (no census
// tensor: the host holds it), then torch.as_strided(copy, sizes, strides, storage_offset) where those
// differ: a new device tensor, made by _to_copy.
Tensor copy_from_host(const Dims& host_sizes, DType dtype, const Dims& sizes, const Dims& strides,
                      int64_t storage_offset);

// self.to(device) from the host to the GPU or back (FSDP2's CPU offloading): a dense copy of self, made
// by _to_copy, with no autograd history (FSDP2 copies under no_grad).
Tensor copy_across_devices(const Tensor& self);

// torchao's Float8Linear (ops/float8.cpp), eager, as its recipes (Float8LinearConfig.from_recipe_name) run
// it: input @ weight.t() through matmul_with_hp_or_float8_args, which saves the bf16 input and the weight and
// casts each operand of its three products to float8 with a dynamic scale; then + bias.
enum class Float8Recipe : uint8_t { kTensorwise, kRowwise, kRowwiseWithGwHp };
Tensor float8_linear(const Tensor& input, const Tensor& weight, const Tensor& bias, Float8Recipe recipe);

// bitsandbytes' 4-bit weight (ops/bnb_4bit.cpp): the QuantState functional.quantize_4bit returns beside the
// packed weight (blocks of 64), and bnb.matmul_4bit(A, weight, quant_state, bias) as a release line runs it
// on CUDA: 0.49 dequantizes the whole weight in every forward; 0.50 runs its fused kernel, and the same
// dequantization (its fallback) past 1536 tokens or where the inner dimension is no multiple of the block.
// Either saves nothing but the packed weight; its backward dequantizes the weight again.
enum class BnbVersion : uint8_t { k0_49, k0_50 };
struct QuantState4bit {
  Dims shape;          // the weight's (out, in)
  DType dtype;         // the weight's dtype when quantized: the dequantized weight's
  int64_t blocksize = 64;
  Tensor absmax;       // fp32 [blocks], or uint8 where nested (double quantization)
  Tensor code;         // the 4-bit type's 16 values, fp32
  Tensor offset;       // nested: the fp32 mean taken off the absmax before its own quantization
  Tensor state2_absmax;  // nested: fp32 [ceil(blocks / 256)]
  Tensor state2_code;    // nested: its copy of the dynamic map, fp32 [256]
  bool nested() const { return offset.defined(); }
};
Tensor bnb_matmul_4bit(const Tensor& input, const Tensor& packed, const Tensor& bias, const QuantState4bit& state,
                       BnbVersion version);
// Whether the ops running now are MatMul4Bit.forward's (under its no_grad, as an autograd.Function's forward
// runs): the plan's time model prices their product's backward as MatMul4Bit.backward runs it, the input's
// gradient alone, over the weight dequantized again (plan/plan_cost.cpp).
bool inside_matmul_4bit();
// functional.dequantize_4bit(packed, state): the (out, in) weight in the state's dtype, with no autograd
// history (PEFT's dequantize_module_weight, which DoRA reads).
Tensor bnb_dequantize_4bit(const Tensor& packed, const QuantState4bit& state);

// --- Elementwise ---
Tensor to(const Tensor& self, DType dtype);  // _to_copy, or self when the dtype already matches
Tensor pow(const Tensor& self, double exponent);
Tensor rsqrt(const Tensor& self);
Tensor mul(const Tensor& self, const Tensor& other);
Tensor mul(const Tensor& self, double other);  // mul.Scalar: a Python number, saves nothing
Tensor div(const Tensor& self, double other);
// self * number written in Python: mul.Tensor with a wrapped number, which autograd keeps no tensor for.
Tensor mul_number(const Tensor& self, double other);
Tensor add(const Tensor& self, const Tensor& other);
Tensor add(const Tensor& self, double other);  // add.Tensor with a wrapped number
Tensor sub(const Tensor& self, double other);  // sub.Tensor with a wrapped number (self - 1)
// self += other; where autograd tracks it, self's history becomes an AddBackward0 over the old one.
Tensor& add_(Tensor& self, const Tensor& other);
// self *= other on a tensor autograd tracks (Gemma 4's layer_scalar): its node keeps other, and a clone
// of self as it was where other needs a gradient.
Tensor& mul_(Tensor& self, const Tensor& other);
Tensor neg(const Tensor& self);
Tensor silu(const Tensor& self);
Tensor silu_backward(const Tensor& grad, const Tensor& self);
Tensor relu(const Tensor& self);
// gelu(self, approximate='tanh'), as Transformers' gelu_pytorch_tanh runs it.
Tensor gelu_tanh(const Tensor& self);
Tensor cos(const Tensor& self);
Tensor sin(const Tensor& self);
Tensor clone(const Tensor& self);  // keeps dense strides (preserve_format)
Tensor clone_contiguous(const Tensor& self);
Tensor& copy_(Tensor& self, const Tensor& src);

// --- Reductions ---
Tensor mean(const Tensor& self, int64_t dim, bool keepdim);
Tensor sum(const Tensor& self, const std::vector<int>& dims, bool keepdim);
// at::sum_to: reduce a broadcast gradient to `sizes` (a sum with keepdim, then a view).
Tensor sum_to(const Tensor& self, const Dims& sizes);

// --- Shapes and views ---
Tensor view(const Tensor& self, const Dims& sizes);
Tensor unsafe_view(const Tensor& self, const Dims& sizes);
Tensor reshape(const Tensor& self, const Dims& sizes);  // view if strides allow, else clone + _unsafe_view
Tensor t(const Tensor& self);
Tensor transpose(const Tensor& self, int64_t dim0, int64_t dim1);
Tensor unsqueeze(const Tensor& self, int64_t dim);
Tensor squeeze(const Tensor& self, int64_t dim);
Tensor slice(const Tensor& self, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
Tensor slice_backward(const Tensor& grad, const Dims& input_sizes, int dim, int64_t start, int64_t end, int64_t step = 1);
Tensor expand(const Tensor& self, const Dims& sizes);
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim);
Tensor contiguous(const Tensor& self);  // clone when not contiguous, else self

// --- Matrix products ---
Tensor mm(const Tensor& self, const Tensor& mat2);
Tensor addmm(const Tensor& bias, const Tensor& mat1, const Tensor& mat2);
Tensor matmul(const Tensor& self, const Tensor& other);
Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor());

// --- Routing and experts ---
// softmax(self, dim, dtype): a _to_copy to `dtype` where it differs, then _softmax, which saves its result.
// No dtype: self's (fp32 under autocast).
Tensor softmax(const Tensor& self, int64_t dim, std::optional<DType> dtype);
Tensor div(const Tensor& self, const Tensor& other);
// self /= other on a tensor autograd tracks: its node keeps a clone of self as it was, and other.
Tensor& div_(Tensor& self, const Tensor& other);
Tensor ge(const Tensor& self, double other);             // bool
Tensor floor_divide(const Tensor& self, int64_t other);  // integer tensors
Tensor& clamp_max_(Tensor& self, double max);            // integer tensors: no node
Tensor bitwise_not(const Tensor& self);
// clamp(self, min, max), either bound optional; its node keeps self.
Tensor clamp(const Tensor& self, std::optional<double> min, std::optional<double> max);
struct ValuesIndices {
  Tensor values;
  Tensor indices;  // int64
};
// topk along the last dim; its node keeps the indices.
ValuesIndices topk(const Tensor& self, int64_t k);
ValuesIndices sort(const Tensor& self);  // 1-d integer tensors: no node
// self[index] with one int64 index on dim 0 (of any shape: the result is index's shape, then self's
// trailing dims); its node keeps the index.
Tensor index(const Tensor& self, const Tensor& index);
// self[indices[0], indices[1], ...] with 1-d int64 indices of one length on the leading dims; its node
// keeps the indices.
Tensor index(const Tensor& self, const std::vector<Tensor>& indices);
// self[index] = values, in place, on integer tensors: no node.
Tensor& index_put_(Tensor& self, const Tensor& index, const Tensor& values);
// Out of place, with accumulation: what the index backward runs.
Tensor index_put(const Tensor& self, const Tensor& index, const Tensor& values);
// self.gather(dim, index); its node keeps self and the index.
Tensor gather(const Tensor& self, int64_t dim, const Tensor& index);
Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
Tensor& scatter_(Tensor& self, int64_t dim, const Tensor& index, double value);  // no node
// self.masked_fill_(mask, value): its node keeps the mask.
Tensor& masked_fill_(Tensor& self, const Tensor& mask, double value);
Tensor histc(const Tensor& self, int64_t bins);
// The eager experts loop's ops (on integer tensors and masks, no nodes, except where noted).
// F.one_hot as ATen runs it on CPU: aminmax and two scalar reads checking the range (CUDA skips
// them), zeros, then scatter_ of ones.
Tensor one_hot(const Tensor& self, int64_t num_classes);  // int64, one more dim
// A scalar read of a 0-d tensor (item(), or bool() in an `if`).
void item(const Tensor& self);
Tensor permute(const Tensor& self, const std::vector<int>& dims);
// nonzero(self): (count, dim) int64. Which elements are nonzero is data; the census is told how many.
Tensor nonzero(const Tensor& self, int64_t count);
Tensor eq(const Tensor& self, double other);  // bool
Tensor gt(const Tensor& self, double other);  // bool
// self.select(dim, index): a view; its node's backward (select_backward) allocates self's size.
Tensor select(const Tensor& self, int64_t dim, int64_t index);
// Views; one UnbindBackward0 node where self requires a gradient (DeepSeek-V4's hyper-connection scales).
std::vector<Tensor> unbind(const Tensor& self, int64_t dim);
// self.index_add_(dim, index, source) along dim 0; its node keeps the index.
Tensor& index_add_(Tensor& self, const Tensor& index, const Tensor& source);
// self.index_select(0, index); its node keeps the index, and its backward is grad.new_zeros(self's
// sizes).index_add(0, index, grad), out of place (Note [Subclass-like under fake tensors], ops/routing.cpp).
Tensor index_select(const Tensor& self, const Tensor& index);
Tensor index_add(const Tensor& self, const Tensor& index, const Tensor& source);  // along dim 0, out of place
// _grouped_mm(self (S, K), mat2 (E, K, N), offs (E) int32) -> (S, N); the backward of 2-d by 2-d
// (E, M, N) gives the weight's gradient.
Tensor grouped_mm(const Tensor& self, const Tensor& mat2, const Tensor& offs);

// --- Loss ---
Tensor ones_like(const Tensor& self);
// F.pad(self, (left, right), value) on the last dim: constant_pad_nd. (Used on labels: no node.)
Tensor constant_pad(const Tensor& self, int64_t left, int64_t right);
// log_softmax over `dim`: _log_softmax, which saves its result.
Tensor log_softmax(const Tensor& self, int64_t dim);
// nll_loss, mean or sum reduction alike (the same kernels, the same saves): nll_loss_forward, which saves
// self, target and total_weight.
Tensor nll_loss(const Tensor& self, const Tensor& target);
// F.cross_entropy with class-index targets: log_softmax then nll_loss, as ATen decomposes it.
Tensor cross_entropy(const Tensor& self, const Tensor& target);
// On tensors autograd does not track (labels, masks, argmax's indices): no node.
Tensor ne(const Tensor& self, double other);                 // bool
Tensor eq(const Tensor& self, const Tensor& other);          // bool
Tensor bitwise_and(const Tensor& self, const Tensor& other);  // bool & bool: bool
Tensor argmax(const Tensor& self, int64_t dim);              // int64, dim reduced
Tensor ceil(const Tensor& self);
// self.argsort(stable=True) (either direction): int64 indices.
Tensor argsort_stable(const Tensor& self);

// --- Gated delta net (Qwen3-Next and Qwen3.5 linear attention) ---
// Factories: no node.
Tensor ones(const Dims& sizes, DType dtype);
Tensor zeros(const Dims& sizes, DType dtype);
Tensor zeros_like(const Tensor& self);  // keeps self's layout, as preserve_format does
Tensor zeros_like(const Tensor& self, DType dtype);
Tensor eye(int64_t n, DType dtype);
Tensor new_empty_strided(const Tensor& self, const Dims& sizes, const Dims& strides);
// Elementwise.
Tensor sub(const Tensor& self, const Tensor& other);
Tensor exp(const Tensor& self);                 // saves its result
Tensor sigmoid(const Tensor& self);             // saves its result
Tensor tanh(const Tensor& self);                // saves its result
Tensor softplus(const Tensor& self);            // saves its input (beta 1, threshold 20)
Tensor tril(const Tensor& self, int64_t diagonal = 0);
Tensor triu(const Tensor& self, int64_t diagonal = 0);
Tensor cumsum(const Tensor& self, int64_t dim, std::optional<DType> dtype = std::nullopt);  // dtype: the result's
Tensor flip(const Tensor& self, int64_t dim);
Tensor masked_fill(const Tensor& self, const Tensor& mask);  // masked_fill.Scalar: saves the mask
// Views.
// torch.split(self, [a, b, ...], dim): views with one SplitWithSizesBackward0 node.
std::vector<Tensor> split_with_sizes(const Tensor& self, const std::vector<int64_t>& split_sizes, int64_t dim);
std::vector<Tensor> chunk(const Tensor& self, int64_t chunks, int64_t dim);  // split.Tensor
// self.tensor_split(sections, dim): `sections` slices, the first size % sections of them one longer. ATen
// composes it of slice(), so each part is a view with a SliceBackward0 node of its own.
std::vector<Tensor> tensor_split(const Tensor& self, int64_t sections, int64_t dim);
// split(self, split_size, dim): parts of split_size (the last may be shorter), one SplitBackward0 node.
std::vector<Tensor> split(const Tensor& self, int64_t split_size, int64_t dim);
// repeat_interleave(self, repeats, dim) as ATen composes it: unsqueeze, expand, contiguous clone, flatten.
Tensor repeat_interleave(const Tensor& self, int64_t repeats, int64_t dim);
// F.pad(self, pad): `pad` lists (left, right) pairs from the last dim inwards; negative pads narrow.
Tensor constant_pad_nd(const Tensor& self, const std::vector<int64_t>& pad);
// One step of a Python index: an integer (select) or a slice start:end along `dim`.
struct IndexStep {
  bool select;
  int dim;
  int64_t start;  // the index, for a select
  int64_t end;
};
// Python's `base[index] = src`: copy_ into the view the index takes, and base's history rebased onto
// a CopySlices node, as autograd does for an in-place op on a view.
void assign_index(Tensor& base, std::initializer_list<IndexStep> index, const Tensor& src);
Tensor index_view(const Tensor& base, std::span<const IndexStep> index);
// Batched products. matmul of two tensors of 3+ dims expands their batch dims, folds them and runs bmm.
Tensor bmm(const Tensor& self, const Tensor& mat2);
// F.conv1d(input (B, C, L), weight (C, 1, K), bias (C) or undefined, padding, groups=C): aten.convolution,
// depthwise.
Tensor conv1d_depthwise(const Tensor& input, const Tensor& weight, int64_t padding, const Tensor& bias = Tensor());
// The gated delta rule kernel's contract (HyperParallel's chunked kernel, shapes only): saves q, k, v,
// fp32 cumulated gates (B, S, H), beta and one (B, S, H, chunk) matrix in k's dtype; returns v's shape.
Tensor gated_delta_rule_contract(const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& g,
                                 const Tensor& beta, int64_t chunk_size);

// --- Mamba-2 fused kernel contract (ops/mamba_split_conv1d_scan_combined.cpp) ---
// mamba_ssm's mamba_split_conv1d_scan_combined, shapes only: returns (B, S, out_proj rows) in zxbcdt's
// dtype; saves zxbcdt, the scan's (B, S, Nh, P) output before the norm, A, the norm's fp32 rstd
// (B * S * G) where rmsnorm_weight is defined, and the parameters.
Tensor mamba_split_conv1d_scan_combined(const Tensor& zxbcdt, const Tensor& conv1d_weight, const Tensor& conv1d_bias,
                                        const Tensor& dt_bias, const Tensor& A, const Tensor& D,
                                        const Tensor& rmsnorm_weight, const Tensor& outproj_weight,
                                        int64_t num_heads, int64_t head_dim, int64_t n_groups);

// --- Attention kernel contract ---
struct FlashOutputs {
  Tensor out;        // (B, Nh, S, Dv) in q's dtype
  Tensor softmax_a;  // (B, Nh, S, 8) fp32
  Tensor softmax_b;  // (B, Nh, S, 8) fp32
};
// The census's flash attention: grouped K/V not expanded; saves q, k, v, out and both statistics.
// `op` names the kernel: the census's own, or torch_npu's npu_fusion_attention (BNSD), whose contract
// saves and returns the same.
FlashOutputs flash_attention(const Tensor& query, const Tensor& key, const Tensor& value, Op op = Op::kFlashAttention);
// Statistics a flash kernel keeps per head and token.
inline constexpr int64_t kFlashStats = 8;
// The CUDA flash contract (PyTorch's _scaled_dot_product_flash_attention): out (B, Nh, S, Dv) as a
// transposed view of a (B, S, Nh, Dv) allocation; saves q, k, v, out, the fp32 log-sum-exp (B, Nh, S)
// and the two int64 RNG-state scalars. Returns out.
Tensor cuda_flash_attention(const Tensor& query, const Tensor& key, const Tensor& value);

// --- NPU kernel contracts (ops/npu_contracts.cpp) ---
// What torch_npu's kernels return and keep, as the reference census's contracts state them: each a
// custom op whose backward returns empty tensors of its differentiable inputs' sizes (zeros handed in
// for its non-differentiable outputs' gradients, as a custom op's node materializes them).
struct NpuRmsNormOutputs {
  Tensor y;     // x's shape and dtype
  Tensor rstd;  // (..., 1) fp32, not differentiable
};
// npu_rms_norm(x, gamma, epsilon): saves x, gamma and rstd.
NpuRmsNormOutputs npu_rms_norm(const Tensor& x, const Tensor& gamma);
// npu_swiglu(x, dim=-1): half of x's last dim; saves x (the gate and up projections side by side).
Tensor npu_swiglu(const Tensor& x);
// npu_rotary_mul(x, r1, r2): x's shape; saves x, r1 and r2.
Tensor npu_rotary_mul(const Tensor& x, const Tensor& r1, const Tensor& r2);
struct NpuPermuted {
  Tensor permuted;        // (routes, H)
  Tensor sorted_indices;  // (routes) int32, not differentiable
};
// npu_moe_token_permute(tokens (T, H), indices (T, K)): saves tokens, indices and sorted_indices.
NpuPermuted npu_moe_token_permute(const Tensor& tokens, const Tensor& indices);
// npu_moe_token_unpermute(permuted, sorted_indices, probs (T, K)): (T, H); saves all three.
Tensor npu_moe_token_unpermute(const Tensor& permuted, const Tensor& sorted_indices, const Tensor& probs);
// HyperParallel's GMMFunction over npu_grouped_matmul: x (rows, K) times each group's weight
// (E, K, N); saves x, weight and the int64 group_list (its backward's dx, then the grouped dW).
Tensor npu_grouped_matmul(const Tensor& x, const Tensor& weight, const Tensor& group_list);

// --- Liger's kernels (ops/liger_kernels.cpp) ---
// Liger's torch.autograd.Functions (Liger-Kernel ead96b6 ops/), their Triton kernels dispatched as ops that
// write into what the Python made.
// LigerRMSNormFunction.apply(x, weight, eps, offset, casting_mode, in_place) (casting modes _CASTING_MODE_LLAMA
// and _CASTING_MODE_GEMMA, either offset: the same bytes): y = empty (x's rows), rstd = empty (rows) fp32; saves x, weight,
// rstd. Its backward writes dx over the incoming gradient (in_place) or into a zeros_like of it, and reduces
// an (sm_count, D) fp32 buffer of partial weight gradients.
Tensor liger_rms_norm(const Tensor& hidden_states, const Tensor& weight, int64_t sm_count, bool in_place = true);
// LigerSiLUMulFunction.apply(a, b), and LigerGELUMulFunction's (the tanh GELU): c = empty_like(a); saves a and
// b; its backward writes da and db into their storages and returns views of them.
Tensor liger_silu_mul(const Tensor& a, const Tensor& b);
Tensor liger_gelu_mul(const Tensor& a, const Tensor& b);
// LigerRopeFunction.apply(q, k, cos, sin), q and k (B, N, S, D): both rotated in place and returned as views;
// saves cos and sin.
std::pair<Tensor, Tensor> liger_rope(const Tensor& q, const Tensor& k, const Tensor& cos, const Tensor& sin);

// --- stack (ops/stack.cpp) ---
// stack(tensors, dim): the inputs (equal shapes) side by side along a new dim, one new allocation;
// its node keeps no tensor, its backward unbinds the gradient (views).
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim);
// --- Dropout (ops/dropout.cpp) ---
// F.dropout(self, p, training=True) as ATen's composite runs it where the fused kernel does not
// (off CUDA): noise = empty_like(self).bernoulli_(1 - p); noise.div_(1 - p); self * noise, whose
// MulBackward0 keeps the noise (self's dtype and size). p == 0 returns self, and runs nothing.
Tensor dropout(const Tensor& self, double p);
// F.dropout(self, p, training=True) on CUDA, where the fused kernel runs it: native_dropout, whose output
// is new and whose bool mask its backward keeps (NativeDropoutBackward0's result1).
Tensor native_dropout(const Tensor& self, double p);
// noise.bernoulli_(p) and noise.div_(number) on a tensor autograd does not track: no node.
Tensor& bernoulli_(Tensor& self, double p);
Tensor& div_(Tensor& self, double other);

// --- Llama 4 (ops/complex.cpp: its rotary; ops/llama4.cpp: its attention temperature and router) ---
// torch.view_as_complex(self (..., 2) fp32): a complex64 view (...); torch.view_as_real, the reverse.
Tensor view_as_complex(const Tensor& self);
Tensor view_as_real(const Tensor& self);
// torch.polar(abs, angle): complex64 of their size; under no_grad in the model (no node).
Tensor polar(const Tensor& abs, const Tensor& angle);
// log1p and floor on tensors autograd does not track (positions): no node.
Tensor log1p(const Tensor& self);
Tensor floor(const Tensor& self);
// self.repeat(repeats): a new tensor, each dim times its repeat; its node keeps no tensor.
Tensor repeat(const Tensor& self, const Dims& repeats);
Tensor full_like(const Tensor& self, double value);
// self.scatter_(dim, index, src): its node keeps the index (src's gradient gathers it).
Tensor& scatter_(Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);

// --- A training step's own ops (ops/embedding.cpp, ops/optimizer.cpp) ---
// F.embedding(input (..) int64, weight (V, H)): (.., H) in weight's dtype; its node keeps the indices,
// and its backward's embedding_dense_backward allocates a whole (V, H) gradient.
Tensor embedding(const Tensor& weight, const Tensor& indices);
// torch.randint(low, high, sizes): int64. torch.randn(sizes, dtype, requires_grad): a leaf.
Tensor randint(const Dims& sizes);
Tensor randn(const Dims& sizes, DType dtype, bool requires_grad = false);
// self / number written in Python: div.Tensor with a wrapped number, which autograd keeps no tensor
// for; its backward is grad / number, one allocation (no node on an untracked tensor: Llama 4's
// positions). Defined in ops/optimizer.cpp.
Tensor div_number(const Tensor& self, double other);
// torch.tensor(0.0): a 0-d fp32 tensor, lift_fresh as a dispatch mode sees it.
Tensor scalar_tensor_fresh();
// torch.tensor(a list of numbers): a new tensor of `sizes`, lift_fresh of itself.
Tensor tensor_fresh(const Dims& sizes, DType dtype);
// sqrt: its node keeps the result (DeepSeek-V4's sqrt(softplus) router scores).
Tensor sqrt(const Tensor& self);
// In place, on tensors autograd does not track (the optimizer runs under no_grad).
Tensor& add_(Tensor& self, double other);                  // add_.Tensor with a wrapped number
Tensor& mul_(Tensor& self, double other);                  // mul_.Tensor with a wrapped number
Tensor& lerp_(Tensor& self, const Tensor& end, double weight);
Tensor lerp(const Tensor& self, const Tensor& end, double weight);  // out of place, self's layout
Tensor& addcmul_(Tensor& self, const Tensor& tensor1, const Tensor& tensor2, double value);
Tensor& addcdiv_(Tensor& self, const Tensor& tensor1, const Tensor& tensor2, double value);
// torch._foreach_*: one op over whole lists (AdamW's foreach form), in place where named with a _; the
// scalars (a Python number, a list of them) move no bytes. _foreach_sqrt allocates one result a tensor.
void foreach_add_(std::span<Tensor> self, const Tensor& other);  // _foreach_add_.Tensor: a 0-d tensor
void foreach_add_(std::span<Tensor> self, double other);         // _foreach_add_.Scalar
void foreach_mul_(std::span<Tensor> self, double other);         // _foreach_mul_.Scalar
void foreach_lerp_(std::span<Tensor> self, std::span<const Tensor> end, double weight);
void foreach_addcmul_(std::span<Tensor> self, std::span<const Tensor> tensor1, std::span<const Tensor> tensor2,
                      double value);
std::vector<Tensor> foreach_sqrt(std::span<const Tensor> self);
void foreach_div_(std::span<Tensor> self, std::span<const double> other);  // _foreach_div_.ScalarList
void foreach_addcdiv_(std::span<Tensor> self, std::span<const Tensor> tensor1, std::span<const Tensor> tensor2,
                      std::span<const double> values);  // _foreach_addcdiv_.ScalarList
// torch._fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, [], steps): AdamW's update of every list in
// one kernel, in place.
void fused_adamw_(std::span<Tensor> params, std::span<const Tensor> grads, std::span<Tensor> exp_avgs,
                  std::span<Tensor> exp_avg_sqs, std::span<Tensor> steps);

// --- The other optimizers (nn/sgd.h, nn/adafactor.h, nn/adamw8bit.h), under no_grad: no node ---
// torch.linalg.vector_norm(self) (self.norm(2)): a 0-d tensor of self's dtype; along one dim, keepdim.
Tensor linalg_vector_norm(const Tensor& self);
Tensor linalg_vector_norm(const Tensor& self, int64_t dim, bool keepdim);
Tensor& pow_(Tensor& self, double exponent);  // pow_.Scalar (square_ is pow_(2))
Tensor& rsqrt_(Tensor& self);
Tensor& clamp_min_(Tensor& self, double min);  // clamp_(min=): clamp_.default
Tensor& div_number_(Tensor& self, double other);  // div_.Tensor with a wrapped number
void foreach_add_(std::span<Tensor> self, std::span<const Tensor> other);   // _foreach_add_.List (alpha)
void foreach_mul_(std::span<Tensor> self, std::span<const Tensor> other);   // _foreach_mul_.List
void foreach_mul_(std::span<Tensor> self, std::span<const double> other);   // _foreach_mul_.ScalarList
void foreach_div_(std::span<Tensor> self, std::span<const Tensor> other);   // _foreach_div_.List
void foreach_lerp_(std::span<Tensor> self, std::span<const Tensor> end, std::span<const double> weight);
void foreach_clamp_min_(std::span<Tensor> self, double min);                // _foreach_clamp_min_.Scalar
void foreach_rsqrt_(std::span<Tensor> self);
// _foreach_mul.List: a new tensor each, of self's.
std::vector<Tensor> foreach_mul(std::span<const Tensor> self, std::span<const Tensor> other);
// torch._fused_sgd_(params, grads, momentum_buffers): SGD's update of every list in one kernel, in place.
void fused_sgd_(std::span<Tensor> params, std::span<const Tensor> grads, std::span<Tensor> momentum_buffers);
// bitsandbytes' update kernels, in place on the parameter and its states, allocating nothing (their
// register_fake): optimizer_update_32bit (a parameter under min_8bit_size) and
// optimizer_update_8bit_blockwise, which also reads the two quantile maps and the two block maxima.
void bnb_optimizer_update_32bit(Tensor& param, const Tensor& grad, Tensor& state1, Tensor& state2);
void bnb_optimizer_update_8bit_blockwise(Tensor& param, const Tensor& grad, Tensor& state1, Tensor& state2,
                                         std::span<const Tensor> maps_and_maxima);

// --- DeepSeek-V4 (ops/compressed_attention.cpp) ---
// self >= other, broadcast: bool.
Tensor ge(const Tensor& self, const Tensor& other);
// self.new_full(sizes, value): self's dtype, no node.
Tensor new_full(const Tensor& self, const Dims& sizes, double value);
// torch.where(condition, self, other), broadcast; its node keeps the condition.
Tensor where(const Tensor& condition, const Tensor& self, const Tensor& other);

// --- Collectives (ops/collectives.cpp) ---
// torch's _c10d_functional ops over a process group of `group_size` ranks, as one rank runs them: each
// allocates its output on the rank (a new storage; the input is not freed by it) and moves no FLOPs.
// Their autograd is _c10d_functional_autograd's and DTensor's redistribution's: an all-gather's
// backward is a reduce-scatter of the gradient, a reduce-scatter's an all-gather, an all-to-all's the
// reverse all-to-all; an all-reduce (Partial -> Replicate) passes its gradient through.
// all_gather_into_tensor: (n, ...) -> (group_size n, ...), the ranks' shards stacked on dim 0.
Tensor all_gather_into_tensor(const Tensor& self, int64_t group_size);
// reduce_scatter_tensor(reduce_op="sum"): (group_size n, ...) -> (n, ...), the rank's summed shard.
Tensor reduce_scatter_tensor(const Tensor& self, int64_t group_size);
// all_reduce(reduce_op="sum"): self's size, a new tensor.
Tensor all_reduce(const Tensor& self, int64_t group_size);
// all_to_all_single with `output_rows` rows received (split sizes along dim 0; balanced: self's rows).
Tensor all_to_all_single(const Tensor& self, int64_t output_rows, int64_t group_size);
// wait_tensor: returns its input (c10d's Functional.cpp kernel); nothing is allocated.
Tensor wait_tensor(const Tensor& self);
// Bytes one rank sends over the wire for `op` on `bytes` (the input's; the output's for an all-gather)
// among `group_size` ranks, as a ring runs it: all-gather and reduce-scatter (n - 1) / n of the whole,
// all-reduce 2 (n - 1) / n, all-to-all (n - 1) / n of what the rank holds; 0 for one rank or another op.
int64_t collective_wire_bytes(Op op, int64_t bytes, int64_t group_size);
// DTensor's redistributions of a rank's local tensor, as a parallel style runs them (its Redistribute
// autograd function: the backward redistributes the gradient back), over `group_size` ranks:
//   shard(dim) -> replicate  all_gather_into_tensor (dim 0), the chunks laid along `dim` (a view where
//                            every dim before it has size 1, else a cat); backward: partial -> shard(dim)
//   partial -> shard(dim)    the chunks along `dim` laid on dim 0 (cat), reduce_scatter_tensor; backward:
//                            shard(dim) -> replicate
//   partial -> replicate     all_reduce; backward: the gradient passes (replicate -> partial moves nothing)
//   replicate -> shard(dim)  the rank's chunk, cloned; backward: shard(dim) -> replicate
//   replicate, from_local    a replicated input whose gradient comes back partial: forward passes;
//                            backward: partial -> replicate (all_reduce)
Tensor shard_to_replicate(const Tensor& local, int64_t dim, int64_t group_size);
Tensor partial_to_shard(const Tensor& partial, int64_t dim, int64_t group_size);
Tensor partial_to_replicate(const Tensor& partial, int64_t group_size);
Tensor replicate_to_shard(const Tensor& full, int64_t dim, int64_t group_size);
Tensor replicate_with_partial_grad(const Tensor& local, int64_t group_size);

// --- Vocabulary parallelism (ops/vocab_parallel.cpp) ---
// RowwiseParallel on nn.Embedding: the rank's V / T rows of the table (`weight`), the ids outside them
// masked to 0 and their rows zeroed; the output partial (summed by the caller's redistribution). Its
// backward is embedding_dense_backward over the whole vocabulary `vocab_size` (a replicated gradient).
Tensor vocab_parallel_embedding(const Tensor& weight, const Tensor& ids, int64_t vocab_size, int64_t group_size);
// loss_parallel's log_softmax over logits (N, V / T) fp32 sharded on the vocabulary: the max and the sum
// of exponentials all-reduced; saves its result.
Tensor vocab_parallel_log_softmax(const Tensor& self, int64_t group_size);
// loss_parallel's nll_loss (mean, ignore_index -100) of log-probabilities (N, V / T) against `target`
// (N) int64: the rank's gathered entries all-reduced. Its backward runs _nll_loss_and_log_softmax_backward
// on the rank's shard (the log-softmax's own backward then passes the gradient on).
Tensor vocab_parallel_nll_loss(const Tensor& log_probs, const Tensor& target, int64_t group_size);

// A Python autograd.Function whose forward returns its input (a view of it) and whose backward runs
// `on_backward` before handing the gradient on: FSDP2's RegisterPostBackwardFunction and its
// pre-backward hook on a module's output.
Tensor backward_hook(const Tensor& self, std::function<void()> on_backward);

}  // namespace census::ops
