// A Mamba-2 layer of Nemotron-H-8B derived by hand, op by op, from Transformers' torch path
// (NemotronHBlock around NemotronHMamba2Mixer: causal_conv1d_fn, then mamba2_chunk_scan's torch body).
#include <gtest/gtest.h>

#include "census/layer_census.h"
#include "census/parts.h"
#include "models/python_json.h"
#include "models/registry.h"

namespace census {
namespace {

// Nemotron-H-8B's mixer: H = 4096, Nh = 128 heads of P = 64 (I = 8192), G = 8 groups of state N = 128,
// conv kernel K = 4, chunks of L = 128; at S = 4096 tokens, C = 32 chunks. conv_dim = I + 2GN = 10240,
// the projection I + conv_dim + Nh = 18560 wide. Saved storages, in bytes:
//
//   norm (NemotronHRMSNorm, normOp): x.float() S*H*4 = 67108864, the bf16 normalised rows S*H*2 =
//     33554432, rsqrt S*4 = 16384.
//   mixer (ffMM):
//     in_proj's input, the norm's output                   S*H*2              =  33554432
//     the projection (the conv's input is a view of it)    S*18560*2          = 152043520
//     the conv's output (silu's input), S + K - 1 long     10240*4099*2       =  83947520
//     A = -exp(A_log.float()): exp's result and A          2 * Nh*4           =      1024
//     dt + dt_bias (softplus), softplus (clamp)            2 * S*Nh*2         =   2097152
//     x.float() (x * dt), pad(x) (D * x)                   2 * S*I*4          = 268435456
//     dt[..., None].float(), dt.float() (x * dt, A * dt)   2 * S*Nh*4         =   4194304
//     x * dt padded into chunks (Y_diag, the states)       S*I*4              = 134217728
//     C_times_states.sum(-1) (Y_off's product)             S*I*4              = 134217728
//     B and C repeated to the heads, padded; B_decay       3 * S*Nh*N*4       = 805306368
//     G[..., None] and M[..., None], (C, L, L, Nh)          2 * C*L*L*Nh*4     = 536870912
//     L = exp(segment_sum(A)), (Nh, C, L, L)                Nh*C*L*L*4         = 268435456
//     the masks of the two segment sums                    2*L*L + 2*(C+1)^2  =     34946
//     exp(decay_states), exp(A_cumsum)                     2 * Nh*S*4         =   4194304
//     exp(segment_sum of the chunk ends)                   Nh*(C+1)^2*4       =    557568
//     the states with the initial zeros (cat), new_states  2 * (C+1)*Nh*P*N*4 = 276824064
//     out_proj's input, the norm's output cast to bf16     S*I*2              =  67108864
//   mixer.norm (Zamba2RMSNormGated, normOp): the scan's output, gate.float(), silu's output, the
//     gated product (viewed by groups), the normalised groups: 5 * S*I*4 = 671088640; rsqrt S*G*4 = 131072.
//
// ffMM = 2772041346, normOp = 67108864 + 33554432 + 16384 + 671088640 + 131072 = 771899392; saved =
// 3543940738 bytes (865 KB a token). FLOPs: the two projections only (the scan runs mul and sum, no
// matmul): 2*S*H*18560 + 2*S*I*H = 622770257920 + 274877906944 = 897648164864.
TEST(MambaDerivation, NemotronH8BMixerLayer) {
  auto config = read_config(parse_python_json(R"({"model_type": "nemotron_h", "hidden_size": 4096,
      "mamba_num_heads": 128, "mamba_head_dim": 64, "n_groups": 8, "ssm_state_size": 128, "conv_kernel": 4,
      "chunk_size": 128, "hybrid_override_pattern": "M-M-M*-", "time_step_limit": [0.0, Infinity]})"));
  ASSERT_TRUE(config) << config.refusal().message();
  const LayerCensus got = census_layer(*config, 0, 4096);
  EXPECT_EQ(got.saved_bytes, 3543940738);
  EXPECT_EQ(got.saved_by_op[static_cast<size_t>(SavedOp::kFfMM)], 2772041346);
  EXPECT_EQ(got.saved_by_op[static_cast<size_t>(SavedOp::kNormOp)], 771899392);
  const PartCounts flops = census_flops(*config, 0, 4096);
  EXPECT_EQ(flops, (PartCounts{{"ffn", 897648164864}}));
}

// The same layer under --mamba-backend kernel: mamba_ssm's MambaSplitConv1dScanCombinedFn runs from
// the projection to out_proj and its save_for_backward keeps (zxbcdt, conv1d_weight, conv1d_bias,
// out_x, A, D, dt_bias, rmsnorm_weight, rstd, outproj_weight, outproj_bias); the parameters aside:
//   zxbcdt, the projection                    S*18560*2 = 152043520
//   out_x, the scan's output before the norm  S*I*2     =  67108864 (bf16, x's dtype)
//   A, and exp's result inside -exp(A_log)    2 * Nh*4  =      1024
//   rstd, the grouped norm's                  S*G*4     =    131072
// with the norm's 100679680 and in_proj's input 33554432 unchanged: saved = 353518592 bytes, 0.0998 of
// the torch path's 3543940738 (the torch path keeps 10.0 times more).
TEST(MambaDerivation, NemotronH8BMixerLayerUnderTheKernelContract) {
  auto config = read_config(parse_python_json(R"({"model_type": "nemotron_h", "hidden_size": 4096,
      "mamba_num_heads": 128, "mamba_head_dim": 64, "n_groups": 8, "ssm_state_size": 128, "conv_kernel": 4,
      "chunk_size": 128, "hybrid_override_pattern": "M-M-M*-"})"));
  ASSERT_TRUE(config) << config.refusal().message();
  config->mamba->backend = nn::MambaBackend::kKernel;
  const LayerCensus got = census_layer(*config, 0, 4096);
  EXPECT_EQ(got.saved_bytes, 353518592);
  EXPECT_EQ(got.saved_by_op[static_cast<size_t>(SavedOp::kFfMM)], 33554432 + 219284480);
  EXPECT_EQ(got.saved_by_op[static_cast<size_t>(SavedOp::kNormOp)], 100679680);
  // FLOPs are the torch path's either way (the kernel's projection runs inside its Function).
  EXPECT_EQ(census_flops(*config, 0, 4096), (PartCounts{{"ffn", 897648164864}}));
}

// The chunk loop has no cost per token: the scan is a fixed number of ops over all chunks at once, so
// the op count of a Mamba-2 layer is the same at 4k and 128k tokens.
TEST(MambaDerivation, TheScanRunsTheSameOpsAtAnyLength) {
  auto config = read_config(parse_python_json(R"({"model_type": "nemotron_h", "hidden_size": 256,
      "mamba_num_heads": 16, "mamba_head_dim": 32, "n_groups": 2, "ssm_state_size": 16, "chunk_size": 64,
      "layers_block_type": ["linear_attention"]})"));
  ASSERT_TRUE(config) << config.refusal().message();
  const LayerTraffic short_run = census_traffic(*config, 0, 128);
  const LayerTraffic long_run = census_traffic(*config, 0, 8192);
  EXPECT_EQ(short_run.launches, long_run.launches);
}

}  // namespace
}  // namespace census
