// Golden tests of Qwen3-Next's and Qwen3.5's layers against the torch-2 oracle, to the byte: the gated
// delta net in both backends (Transformers' eager chunked rule, and the kernel's contract) and the
// gated attention, with the MoE block as recorded, and with mlp_only_layers listing every layer so
// that each feed-forward is the dense Qwen3NextMLP; and Qwen3_5DecoderLayer as it is
// (scripts/oracle_case.py copied the numbers).
#include <gtest/gtest.h>

#include "oracle_stages.h"

namespace census {
namespace {

class Qwen3NextCase : public ::testing::TestWithParam<std::string> {};
ORACLE_LAYER_STAGES(Qwen3NextCase)

// The recorded cases, as the oracle ran them: every layer's feed-forward the MoE block (router,
// experts, sigmoid-gated shared expert).
INSTANTIATE_TEST_SUITE_P(
    Qwen3NextMoe, Qwen3NextCase,
    ::testing::Values("qwen3_next_h256_s64_linear_attention0_gdn-eager", "qwen3_next_h256_s128_linear_attention0_gdn-eager",
                      "qwen3_next_h256_s256_linear_attention0_gdn-eager", "qwen3_next_h256_s64_linear_attention0_gdn-triton",
                      "qwen3_next_h256_s128_linear_attention0_gdn-triton",
                      "qwen3_next_h256_s256_linear_attention0_gdn-triton",
                      // The same contract as the torch-2 oracle's second round names it.
                      "qwen3_next_h256_s64_linear_attention0_gdn-kernel", "qwen3_next_h256_s128_linear_attention0_gdn-kernel",
                      "qwen3_next_h256_s256_linear_attention0_gdn-kernel", "qwen3_next_h256_s64_full_attention1",
                      "qwen3_next_h256_s128_full_attention1", "qwen3_next_h256_s256_full_attention1",
                      // Qwen3.5-MoE's text layer (its delta net's four projections, the MoE block on
                      // every layer), measured here with the oracle's script.
                      "qwen3_5_moe_text_h256_s128_linear_attention0_gdn-eager",
                      "qwen3_5_moe_text_h256_s128_linear_attention0_gdn-triton",
                      "qwen3_5_moe_text_h256_s128_full_attention1"));

INSTANTIATE_TEST_SUITE_P(
    Qwen3NextDense, Qwen3NextCase,
    ::testing::Values("qwen3_next_dense_h256_s64_linear_attention0_gdn-eager",
                      "qwen3_next_dense_h256_s128_linear_attention0_gdn-eager",
                      "qwen3_next_dense_h256_s256_linear_attention0_gdn-eager",
                      "qwen3_next_dense_h256_s64_linear_attention0_gdn-triton",
                      "qwen3_next_dense_h256_s128_linear_attention0_gdn-triton",
                      "qwen3_next_dense_h256_s256_linear_attention0_gdn-triton",
                      "qwen3_next_dense_h256_s64_full_attention1", "qwen3_next_dense_h256_s128_full_attention1",
                      "qwen3_next_dense_h256_s256_full_attention1",
                      // 100 tokens pad to two chunks; one value head per key head (r = 1: q and k are views
                      // of the conv's output, not repeated); two key heads, one at TP 2 (v, z, b, a views).
                      "qwen3_next_dense_h256_s100_linear_attention0_gdn-eager",
                      "qwen3_next_dense_h256_s100_linear_attention0_gdn-triton",
                      "qwen3_next_dense_h256_s100_full_attention1",
                      "qwen3_next_dense_r1_h256_s100_linear_attention0_gdn-eager",
                      "qwen3_next_dense_r1_h256_s100_linear_attention0_gdn-triton",
                      "qwen3_next_dense_k2_h256_s100_linear_attention0_gdn-eager",
                      "qwen3_next_dense_k2_h256_s100_linear_attention0_gdn-triton",
                      // Qwen3.5's text layers: separate projections, always dense.
                      "qwen3_5_text_h256_s100_linear_attention0_gdn-eager",
                      "qwen3_5_text_h256_s100_linear_attention0_gdn-triton",
                      "qwen3_5_text_h256_s100_full_attention1"),
    [](const ::testing::TestParamInfo<std::string>& info) {
      std::string name = info.param;
      for (char& ch : name)
        if (ch == '-') ch = '_';
      return name;
    });

}  // namespace
}  // namespace census
