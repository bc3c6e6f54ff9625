// The command line on the later MoE families: what `tp-config` states of MiniMax-M2's whole-width q/k
// norms, a Kimi K2.5 wrapper read through its text_config, and the configs these families refuse.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_run.h"

namespace census {
namespace {

using testing::CliRun;
using testing::census;

std::string write_config(const std::string& name, const std::string& text) { return testing::write_test_file(name, text); }

void expect_refused(const CliRun& run, const std::string& mentions) {
  EXPECT_EQ(run.code, 2);
  EXPECT_TRUE(run.out.empty()) << run.out;
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
  EXPECT_NE(run.err.find(mentions), std::string::npos) << run.err;
}

const char* kToyMiniMax = R"({"model_type": "minimax_m2", "hidden_size": 256, "num_attention_heads": 8,
  "num_key_value_heads": 2, "head_dim": 32, "intermediate_size": 256, "num_hidden_layers": 2,
  "num_local_experts": 8, "num_experts_per_tok": 2, "vocab_size": 4096})";

// A rank of TP 2 holds 4 of the 8 heads: its q_norm is 4 * 32 wide, its k_norm 1 * 32, as the
// reference's half-width rank builds them; the table says what the model normalizes over.
TEST(MoeFamiliesCli, TpConfigStatesTheRankWidthsOfWholeProjectionNorms) {
  const std::string path = write_config("minimax.json", kToyMiniMax);
  const CliRun json = census({"tp-config", path, "--tp", "2", "--format", "json"});
  ASSERT_EQ(json.code, 0) << json.err;
  const nlohmann::json rank = nlohmann::json::parse(json.out);
  EXPECT_EQ(rank.at("q_norm_width"), 128);
  EXPECT_EQ(rank.at("k_norm_width"), 32);
  const CliRun table = census({"tp-config", path, "--tp", "2"});
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("over the whole projection in the model (256 and 64 wide)"), std::string::npos) << table.out;
}

// Kimi K2.5's wrapper: its text_config (model_type kimi_k2) is DeepSeek-V3's.
TEST(MoeFamiliesCli, KimiK25WrapperReadsItsTextConfig) {
  const std::string path = write_config("kimi.json", R"({"model_type": "kimi_k25", "text_config": {
    "model_type": "kimi_k2", "hidden_size": 256, "num_attention_heads": 8, "num_key_value_heads": 8,
    "intermediate_size": 512, "moe_intermediate_size": 128, "num_hidden_layers": 3, "n_routed_experts": 8,
    "num_experts_per_tok": 2, "n_group": 1, "topk_group": 1, "first_k_dense_replace": 1, "q_lora_rank": 64,
    "kv_lora_rank": 32, "qk_nope_head_dim": 16, "qk_rope_head_dim": 16, "v_head_dim": 16, "vocab_size": 4096}})");
  const CliRun run = census({"layers", path, "--format", "json"});
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_NE(run.out.find("\"dense\""), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("\"moe\""), std::string::npos) << run.out;
}

TEST(MoeFamiliesCliRefuses, ConfigsTheseFamiliesCannotPrice) {
  expect_refused(census({"layer", write_config("hunyuan.json", R"({"model_type": "hunyuan_v1_moe",
    "num_hidden_layers": 2, "num_experts": 8, "moe_topk": [2, 4]})")}), "moe_topk");
  expect_refused(census({"layer", write_config("lite.json", R"({"model_type": "glm4_moe_lite",
    "num_hidden_layers": 2, "mlp_layer_types": ["dense", "moe"]})")}), "mlp_layer_types");
  // int(128 * 0.001) = 0 channels: no rotary at all.
  expect_refused(census({"layer", write_config("glm.json", R"({"model_type": "glm4_moe", "head_dim": 128,
    "partial_rotary_factor": 0.001})")}), "partial_rotary_factor");
}

}  // namespace
}  // namespace census
