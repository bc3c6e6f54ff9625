// File: attention_kernel.h
// The attention function a census registers with Transformers' attention interface: the flash
// kernel's contract on q (B, Nh, S, D), k and v (B, Nkv, S, D), grouped K/V not expanded, returning
// the output laid out (B, S, Nh, Dv) and contiguous. Which kernel's contract is the run's kernel
// profile.
#pragma once

#include <optional>
#include <string_view>

#include "tensor/tensor.h"

namespace census::nn {

// Note [Kernel profiles] The set of kernel contracts a run uses, one row each in kKernelProfiles
// (attention_kernel.cpp):
//   npu   the reference census's flash contract (the NPU fusion attention's saved set: q, k, v, out,
//         two fp32 (B, Nh, S, 8) statistics; out laid out (B, Nh, S, Dv), so the interface's
//         transpose(1, 2).contiguous() copies it); HyperParallel's fused modules run torch_npu's
//         kernels (ops::npu_*). The default, as the reference's.
//   cuda  FlashAttention-2/3 as PyTorch's _scaled_dot_product_flash_attention saves it (and cuDNN
//         attention, whose saved set is the same): q, k, v, out, the fp32 log-sum-exp (B, Nh, S) and
//         the RNG state (philox seed and offset, two int64 scalars, returned even without dropout);
//         out laid out (B, S, Nh, Dv), so the contiguous copy is none. No fused NPU module runs.
enum class KernelProfile : uint8_t { kNpu, kCuda };

struct KernelProfileFacts {
  KernelProfile profile;
  std::string_view name;
  std::string_view attention_kernel;  // the contract's op
  int64_t statistics;                 // fp32 statistics saved per head and token (8 a pair, or 1)
  int64_t rng_state_tensors;          // int64 scalars of RNG state saved
  bool output_in_bshd;                // out allocated (B, S, Nh, Dv) and handed back transposed
  bool fused_npu_modules;             // a train.yaml's fused modules can run
};

const KernelProfileFacts& kernel_profile(KernelProfile profile);
std::optional<KernelProfile> parse_kernel_profile(std::string_view name);

Tensor flash_attention_forward(const Tensor& query, const Tensor& key, const Tensor& value,
                               KernelProfile kernels = KernelProfile::kNpu);

}  // namespace census::nn
