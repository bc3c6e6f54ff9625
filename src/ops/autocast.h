// File: autocast.h
// torch.autocast(device_type="cuda", dtype=torch.bfloat16), as ATen's autocast_mode.cpp runs it (the HF
// Trainer's bf16=True, through accelerate). While a region is open, an op on CUDA's lists casts its
// floating tensor arguments before it runs, by the list's policy:
//   lower_precision_fp  mm, addmm, bmm, matmul, linear, conv1d, scaled_dot_product_attention: to bf16
//   fp32                pow, rsqrt, exp, softplus, nll_loss: to fp32
//   fp32_set_opt_dtype  sum, softmax, log_softmax, cumsum: an fp32 result where no dtype is asked
// and the ops it runs inside see no autocast (WrapFunction_'s ExcludeDispatchKeyGuard): linear casts
// once, then its addmm runs as it is. Every other op runs as it is (mean, silu, mul, add, embedding,
// _grouped_mm: no list names them). CUDA's promote list (index_put, scatter_add, addcmul, ...) is not
// wrapped: no forward Census prices under autocast runs them on floating tensors of two dtypes. The lists are CUDA's, not the CPU's (AutocastCPU also promotes cat
// and stack, and has no fp32 rule for pow, rsqrt, exp, softmax or sum).
//
// An op casts its arguments in their order, as the oracle's kernels do (CUDA's kernels expand them in a C++
// function call, whose order the compiler chooses): the same bytes, in an order only the allocator sees.
//
// cached_cast: the bf16 cast of an fp32 leaf that requires grad (a trainable parameter) is made once per
// region and shared by every use, until the outermost region closes; any other tensor (an activation, a
// frozen weight) is cast again at each use.
#pragma once

#include "tensor/tensor.h"

namespace census {

// One `with torch.autocast("cuda", dtype=torch.bfloat16, enabled=enabled):` on this thread. Regions nest,
// as the context manager does (Transformers' rotary embedding opens one with enabled=False); the
// outermost's exit empties the cast cache (torch.clear_autocast_cache).
class AutocastScope {
 public:
  explicit AutocastScope(bool enabled);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool previous_enabled_;
};

namespace autocast {

// Whether a region is open and enabled on this thread (torch.is_autocast_enabled("cuda")).
bool is_enabled();

// An op on CUDA's lists, made first thing in the op: true where autocast applies to this call; then, while
// it lives, the ops the call runs inside see none.
class Wrap {
 public:
  Wrap();
  ~Wrap();
  Wrap(const Wrap&) = delete;
  Wrap& operator=(const Wrap&) = delete;
  explicit operator bool() const { return active_; }

  // cached_cast(bf16, t): lower_precision_fp's cast of one argument (undefined and non-floating as they are).
  Tensor lower(const Tensor& t) const;
  // cached_cast(fp32, t): the fp32 policy's.
  Tensor fp32(const Tensor& t) const;
  // fp32_set_opt_dtype: the dtype of the result where the op is asked none, fp32 for a floating input.
  DType opt_dtype(const Tensor& first) const;

 private:
  bool active_;
};

}  // namespace autocast
}  // namespace census
