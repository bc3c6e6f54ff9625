// File: mamba2_mixer.h
// The Mamba-2 mixer of the hybrid families (Nemotron-H's NemotronHMamba2Mixer, Granite-4.0-H's
// GraniteMoeHybridMambaLayer, Falcon-H1's FalconH1Mixer), as Transformers 5 runs it in training where the hub kernels and
// mamba_ssm are absent: mamba2_split_conv1d_scan_combined returns None, then causal_conv1d_fn and the
// torch body of mamba2_chunk_scan run, op by op.
//
//   in_proj (B, S, H) -> (B, S, I + conv_dim + Nh), split into gate (I), x B C (conv_dim), dt (Nh)
//   A = -exp(A_log.float())
//   conv: depthwise causal conv1d (with its bias) and silu over (B, conv_dim, S); split into x, B, C
//   chunk scan: dt = clamp(softplus(dt + dt_bias), time_step_limit); x, B, C in fp32 (B and C repeated
//     to the heads), D * x kept aside, x * dt and A * dt, padded to whole chunks of chunk_size and
//     reshaped (B, C, L, ...); the intra-chunk term (segment_sum, exp, C.B, M, Y_diag), the states per
//     chunk, the inter-chunk recurrence over the chunk boundaries (one cat, one segment_sum over C + 1
//     chunk ends), the state-to-output term, + D * x. Every step is one op over all chunks at once:
//     the count of ops does not grow with the tokens.
//   gated RMSNorm in fp32 (x * silu(gate), then the RMS over groups of group_size), out_proj
//
// Falcon-H1's adds its μP multipliers (the input times ssm_in_multiplier, the projection times the
// mup_vector buffer the model registers) and, where mamba_rms_norm is false, gates with no norm.
//
// Its module is kOther under its path ("mixer" in Nemotron-H, "mamba" in Granite and Falcon-H1): the
// reference's rules read its saves as the path's first name says (ffMM for all), the norm's as normOp.
//
// Legend: B = batch (1), S = seq_length, Nh = heads, P = head_dim, G = n_groups, N = ssm_state_size,
// I = Nh * P, L = chunk_size, C = chunks.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "nn/linear.h"
#include "nn/mlp.h"
#include "nn/module.h"

namespace census::nn {

// How the mixer runs (--mamba-backend): Transformers' torch path, or the fused kernel's contract
// (mamba_ssm's mamba_split_conv1d_scan_combined, which a GPU with mamba-ssm installed takes).
enum class MambaBackend : uint8_t { kTorch, kKernel };
std::optional<MambaBackend> parse_mamba_backend(std::string_view name);

struct Mamba2Sizes {
  int64_t hidden_size;
  int64_t num_heads;         // Nh
  int64_t head_dim;          // P
  int64_t intermediate_size; // I (Nh * P)
  int64_t n_groups;          // G
  int64_t ssm_state_size;    // N
  int64_t conv_kernel;
  int64_t chunk_size;
  bool use_conv_bias;
  bool use_bias;             // in_proj (and out_proj but in Falcon-H1)
  bool out_proj_bias;
  double time_step_min;      // the clamp's bounds on dt (its max is always inf in these families)
  double norm_eps;
  // Nemotron-H's norm (Zamba2RMSNormGated) normalises groups of this size through a view; Granite's
  // normalises the whole width with no view (nullopt).
  std::optional<int64_t> norm_group_size;
  // Falcon-H1: the gated RMSNorm or, where mamba_rms_norm is false, x * silu(gate) alone; the μP
  // multipliers (ssm_multipliers make the buffer's values, which a census does not need).
  bool rms_norm = true;
  bool mup = false;
  double ssm_in_multiplier = 1.0;
  // A run option, not a config field (--mamba-backend), carried with the sizes the layers build from.
  MambaBackend backend = MambaBackend::kTorch;
};

class Mamba2Mixer {
 public:
  Mamba2Mixer(std::string path, const Mamba2Sizes& sizes, ParameterList& params);
  Tensor forward(const Tensor& hidden_states) const;
  const Tensor& mup_vector() const { return mup_vector_; }

 private:
  Tensor chunk_scan(Tensor hidden_states, Tensor dt, Tensor A, Tensor B, Tensor C) const;
  Tensor gated_norm(const Tensor& hidden_states, const Tensor& gate) const;

  // Registered as named_parameters() lists them: the mixer's own (dt_bias, A_log, D), then its
  // children's (conv1d, in_proj, norm, out_proj).
  std::string path_;
  std::string norm_path_;
  Mamba2Sizes s_;
  int64_t conv_dim_;  // I + 2 * G * N
  Tensor dt_bias_;    // (Nh)
  Tensor A_log_;      // (Nh)
  Tensor D_;          // (Nh)
  Tensor conv1d_weight_;  // (conv_dim, 1, K)
  Tensor conv1d_bias_;    // (conv_dim) or undefined
  Linear in_proj;         // H -> I + conv_dim + Nh
  Tensor norm_weight_;    // (I)
  Linear out_proj;        // I -> H
  Tensor mup_vector_;     // (1, 1, I + conv_dim + Nh) bf16, a buffer (Falcon-H1)
};

}  // namespace census::nn
