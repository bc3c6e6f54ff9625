// File: liger_kernels.h
// Liger's kernels as its patch puts them on a model instance (linkedin/Liger-Kernel ead96b6,
// transformers/monkey_patch.py: apply_liger_kernel_to_llama and its copies for Mistral, Qwen2, Qwen3 and
// SmolLM3, and apply_liger_kernel_to_gemma, _gemma2 and _gemma3_text, with their defaults), as
// Transformers' Trainer and TRL apply it to the model they train (use_liger_kernel=True):
//
//   rms_norm   LigerRMSNorm.forward bound on each decoder layer's input and post-attention norms and the
//              model's final norm (nn::LlamaRMSNorm's liger_sm_count); Qwen3's per-head q_norm and k_norm
//              keep their own (the patch swaps the class for models built later, and binds those three).
//              Gemma's with offset 1 and the "gemma" casting mode (the same bytes), on every norm of the
//              layer, Gemma 3's q_norm and k_norm too; Gemma 2's and 3's with in_place=False: dX a new
//              zeros_like(dY), where a norm's incoming gradient is needed again (nn::GemmaRMSNorm)
//   swiglu     LigerSwiGLUMLP.forward bound on each layer's MLP (nn::GatedMLP's liger), or Gemma's
//              LigerGEGLUMLP.forward, the same with the tanh GELU
//   rope       liger_rotary_pos_emb in place of the modeling file's apply_rotary_pos_emb (LlamaAttention)
//
// The fused linear cross-entropy, the patch's fourth default, is a loss (nn/liger_fused_linear_cross_entropy.h).
// What each kernel's function allocates and saves is in ops/liger_kernels.cpp; against Transformers' eager
// modules:
//
//   RMSNorm   saves the input, the weight and an fp32 rstd a row, where the eager norm saves an fp32 copy of
//             the input, its rstd and the normalized input; its backward writes dx over the incoming gradient
//             and reduces an (SMs, D) fp32 buffer into the weight's gradient
//   SwiGLU    saves the gate and up projections (one (.., I) fewer than the eager MLP's gate, silu(gate), up
//             and their product); its backward writes their gradients into their storages
//   RoPE      rotates q and k in place and saves cos and sin, where the eager rotary makes q * cos,
//             rotate_half(q) and their sum for each of q and k
#pragma once

#include <cstdint>

namespace census::nn {

// The streaming multiprocessors Liger's RMSNorm backward spreads the weight gradient over
// (torch.cuda.get_device_properties(device).multi_processor_count): an H100's or an H200's.
inline constexpr int64_t kLigerSmCount = 132;

// The gated activation Liger's MLP patch puts in an MLP's forward: LigerSwiGLUMLP's SiLU (Llama and its
// copies) or LigerGEGLUMLP's tanh GELU (Gemma's); none where the MLP keeps its own.
enum class LigerMul : uint8_t { kNone, kSiLU, kGELU };

// Which of Liger's kernels the layers run: a run option (--liger), not a config field.
struct LigerKernels {
  bool rms_norm = false;
  bool swiglu = false;
  bool rope = false;
  int64_t sm_count = kLigerSmCount;
  bool any() const { return rms_norm || swiglu || rope; }
};

}  // namespace census::nn
