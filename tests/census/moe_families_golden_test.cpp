// Golden tests of the later MoE families (GLM-4.5, GLM-4.7-Flash, Qwen3-VL-MoE's text tower,
// MiniMax-M2, ERNIE-4.5-MoE, Hunyuan-MoE) against the torch-2 oracle's recorded cases, to the byte:
// every stage a case recorded (scripts/oracle_case.py copied the numbers into tests/data/oracle/).
#include <gtest/gtest.h>

#include "oracle_stages.h"

namespace census {
namespace {

class MoeFamilyCase : public ::testing::TestWithParam<std::string> {};
ORACLE_LAYER_STAGES(MoeFamilyCase)

// GLM-4.5 (Glm4MoeConfig, toy sizes): the dense layer 0 and the MoE layer 1.
INSTANTIATE_TEST_SUITE_P(Glm4Moe, MoeFamilyCase,
                         ::testing::Values("glm4_moe_h256_s64_dense0", "glm4_moe_h256_s64_moe1",
                                           "glm4_moe_h256_s128_dense0", "glm4_moe_h256_s128_moe1"));

// Qwen3-VL-MoE's text tower (Qwen3VLMoeTextConfig, toy sizes): a MoE layer.
INSTANTIATE_TEST_SUITE_P(Qwen3VlMoe, MoeFamilyCase, ::testing::Values("qwen3_vl_moe_h256_s64", "qwen3_vl_moe_h256_s128"));

// GLM-4.7-Flash (Glm4MoeLiteConfig, toy sizes): the dense layer 0 and the MoE layer 1.
INSTANTIATE_TEST_SUITE_P(Glm4MoeLite, MoeFamilyCase,
                         ::testing::Values("glm4_moe_lite_h256_s64_dense0", "glm4_moe_lite_h256_s64_moe1",
                                           "glm4_moe_lite_h256_s128_dense0", "glm4_moe_lite_h256_s128_moe1"));

// ERNIE-4.5-MoE (Ernie4_5_MoeConfig, toy sizes, two shared experts): the dense layer 0 and the MoE layer 1.
INSTANTIATE_TEST_SUITE_P(Ernie4_5_Moe, MoeFamilyCase,
                         ::testing::Values("ernie4_5_moe_h256_s64_dense0", "ernie4_5_moe_h256_s64_moe1",
                                           "ernie4_5_moe_h256_s128_dense0", "ernie4_5_moe_h256_s128_moe1"));

// MiniMax-M2 (MiniMaxM2Config, toy sizes): its TP-2 stage is the reference's half-width rank.
INSTANTIATE_TEST_SUITE_P(MiniMaxM2, MoeFamilyCase, ::testing::Values("minimax_m2_h256_s64", "minimax_m2_h256_s128"));

// Hunyuan-MoE (HunYuanMoEV1Config, toy sizes).
INSTANTIATE_TEST_SUITE_P(HunYuanMoEV1, MoeFamilyCase,
                         ::testing::Values("hunyuan_v1_moe_h256_s64", "hunyuan_v1_moe_h256_s128"));

}  // namespace
}  // namespace census
