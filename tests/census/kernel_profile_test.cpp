// Kernel profiles (Note [Kernel profiles]): the CUDA flash contract against the oracle's fake census
// with the same contract (a Llama layer, hidden 256, 256 tokens, from its real-GPU check), and the
// difference to the NPU-shaped default derived by hand.
#include <gtest/gtest.h>

#include "census/layer_census.h"
#include "census/selective_census.h"
#include "oracle_cases.h"

namespace census {
namespace {

std::map<std::string, int64_t> present_ops(const LayerCensus& c) {
  std::map<std::string, int64_t> ops;
  for (size_t i = 0; i < kSavedOpCount; ++i)
    if (c.saved_by_op[i]) ops[std::string(saved_op_name(static_cast<SavedOp>(i)))] = c.saved_by_op[i];
  return ops;
}

TEST(KernelProfile, CudaFlashContractEqualsTheOracle) {
  const nlohmann::json oracle = testing::oracle_case("llama_h256_s256_cuda_contract");
  ModelConfig config = testing::oracle_config(oracle);
  for (const auto& [profile, key] : {std::pair{nn::KernelProfile::kCuda, "census_layer"},
                                     std::pair{nn::KernelProfile::kNpu, "npu_standin"}}) {
    config.kernels = profile;
    const LayerCensus c = census_layer(config, 0, 256);
    const nlohmann::json& expected = oracle.at(key);
    EXPECT_EQ(c.saved_bytes, expected.at("saved_bytes").get<int64_t>()) << key;
    EXPECT_EQ(c.kept_bytes, expected.at("kept_bytes").get<int64_t>()) << key;
    EXPECT_EQ(c.working_bytes, expected.at("peak_backward_bytes").get<int64_t>()) << key;
    EXPECT_EQ(present_ops(c), (expected.at("saved_ops").get<std::map<std::string, int64_t>>())) << key;
  }
  config.kernels = nn::KernelProfile::kCuda;
  const SelectiveCensus s = census_selective(config, 0, 256);
  EXPECT_EQ(s.kept_bytes, oracle.at("selective").at("kept_bytes").get<int64_t>());
  EXPECT_EQ(s.working_bytes, oracle.at("selective").at("peak_backward_bytes").get<int64_t>());
}

// Per layer, CUDA against the NPU-shaped default: the statistics are one fp32 log-sum-exp a head and
// token instead of two of 8 (4 S Nh - 64 S Nh bytes), plus two int64 RNG scalars (16 bytes); and the
// kernel's output, already laid out (B, S, Nh, Dv), needs no contiguous copy before o_proj, which
// keeps the kernel's own output (2 S Nh D bytes less).
TEST(KernelProfile, CudaDiffersFromTheDefaultByTheStatisticsAndTheOutputCopy) {
  ModelConfig config = testing::oracle_config(testing::oracle_case("llama_h256_s256_cuda_contract"));
  const int64_t S = 256, Nh = config.num_attention_heads, D = config.head_dim;
  const LayerCensus npu = census_layer(config, 0, S);
  config.kernels = nn::KernelProfile::kCuda;
  const LayerCensus cuda = census_layer(config, 0, S);
  EXPECT_EQ(npu.saved_bytes - cuda.saved_bytes, (2 * 4 * 8 - 4) * S * Nh - 16 + 2 * S * Nh * D);
  EXPECT_EQ(nn::kernel_profile(nn::KernelProfile::kCuda).statistics, 1);
  EXPECT_EQ(nn::parse_kernel_profile("npu"), nn::KernelProfile::kNpu);
  EXPECT_FALSE(nn::parse_kernel_profile("tpu").has_value());
}

}  // namespace
}  // namespace census
