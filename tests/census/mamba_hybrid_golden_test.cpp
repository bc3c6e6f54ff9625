// Golden tests of the Mamba-2 hybrids against the torch-2 oracle, to the byte: Nemotron-H's four
// block types (the Mamba-2 mixer as Transformers' torch path runs it, the attention without rotary,
// the relu² MLP, the MoE), as the oracle recorded them (scripts/oracle_case.py copied the numbers).
#include <gtest/gtest.h>

#include "oracle_stages.h"

namespace census {
namespace {

// Nemotron-H's output layer the reference's method cannot build (its block has no input_layernorm to
// take the final norm's class from): that stage is skipped for its cases.
class MambaHybridCase : public ::testing::TestWithParam<std::string> {};
ORACLE_LAYER_STAGES(MambaHybridCase)

INSTANTIATE_TEST_SUITE_P(NemotronH, MambaHybridCase,
                         ::testing::Values("nemotron_h_h256_s64_mamba0", "nemotron_h_h256_s128_mamba0",
                                           "nemotron_h_h256_s64_attention2", "nemotron_h_h256_s128_attention2",
                                           "nemotron_h_h256_s64_mlp3", "nemotron_h_h256_s128_mlp3",
                                           "nemotron_h_h256_s64_moe1", "nemotron_h_h256_s128_moe1"));

INSTANTIATE_TEST_SUITE_P(FalconH1, MambaHybridCase, ::testing::Values("falcon_h1_h256_s64", "falcon_h1_h256_s128"));

INSTANTIATE_TEST_SUITE_P(GraniteMoeHybrid, MambaHybridCase,
                         ::testing::Values("granitemoehybrid_h256_s64_mamba0", "granitemoehybrid_h256_s128_mamba0",
                                           "granitemoehybrid_h256_s64_attention1",
                                           "granitemoehybrid_h256_s128_attention1"));

}  // namespace
}  // namespace census
