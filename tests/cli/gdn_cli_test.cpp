// The command line on Qwen3-Next configs: the gated delta rule's backend, and refusals of what the
// census cannot price (one line on stderr, exit code 2, nothing on stdout).
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_run.h"

namespace census {
namespace {

using testing::CliRun;
using testing::census;

// The oracle's toy Qwen3-Next (hidden 256, 4 key and 8 value heads of 32), dense layers, with `extra`
// fields replacing its own.
std::string toy_qwen3_next(const std::string& name, const nlohmann::json& extra = nlohmann::json::object()) {
  nlohmann::json config = {{"model_type", "qwen3_next"}, {"hidden_size", 256}, {"num_attention_heads", 8},
                           {"num_key_value_heads", 2}, {"head_dim", 32}, {"intermediate_size", 512},
                           {"num_hidden_layers", 2}, {"vocab_size", 4096},
                           {"layer_types", {"linear_attention", "full_attention"}}, {"mlp_only_layers", {0, 1}},
                           {"linear_num_key_heads", 4}, {"linear_num_value_heads", 8}, {"linear_key_head_dim", 32},
                           {"linear_value_head_dim", 32}, {"linear_conv_kernel_dim", 4}};
  config.update(extra);
  return testing::write_test_file(name, config.dump());
}

void expect_refused(const CliRun& run, const std::string& mentions) {
  EXPECT_EQ(run.code, 2);
  EXPECT_TRUE(run.out.empty()) << run.out;
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
  EXPECT_NE(run.err.find(mentions), std::string::npos) << run.err;
}

// The oracle's qwen3_next_dense_h256_s64 linear-attention layer, in each backend.
TEST(GdnCli, LayerInEachBackend) {
  const std::string config = toy_qwen3_next("next.json");
  for (const auto& [backend, saved, working] : {std::tuple{"eager", 5179968, 5211472}, std::tuple{"triton", 1294912, 1326416}}) {
    const CliRun run = census({"layer", config, "--seq-length", "64", "--gdn-backend", backend, "--format", "json"});
    ASSERT_EQ(run.code, 0) << run.err;
    const auto json = nlohmann::json::parse(run.out);
    EXPECT_EQ(json.at("saved"), saved) << backend;
    EXPECT_EQ(json.at("working"), working) << backend;
  }
  const CliRun plain = census({"layer", config, "--seq-length", "64", "--format", "json"});
  EXPECT_EQ(nlohmann::json::parse(plain.out).at("saved"), 5179968);  // eager by default, as the runtime
}

TEST(GdnCli, ActivationsNameBothKinds) {
  const CliRun run = census({"activations", toy_qwen3_next("next.json"), "--seq-length", "64", "--format", "json",
                             "--gdn-backend", "triton"});
  ASSERT_EQ(run.code, 0) << run.err;
  const auto json = nlohmann::json::parse(run.out);
  EXPECT_EQ(json.at("linear_attention").at("ops_tp").at("linrec"), 4160.0);  // the oracle's record
  EXPECT_TRUE(json.contains("full_attention"));
}

TEST(GdnCli, RefusesAnUnknownBackend) {
  expect_refused(census({"layer", toy_qwen3_next("next.json"), "--gdn-backend", "fla"}), "--gdn-backend");
}

// A backend option on a model without the layers it names would change nothing: refused, not ignored.
TEST(GdnCli, RefusesABackendForLayersTheModelDoesNotHave) {
  expect_refused(census({"layer", "llama-3.1-8b", "--gdn-backend", "triton"}), "no gated-delta-net");
  expect_refused(census({"layer", "qwen3-8b", "--mamba-backend", "kernel"}), "no Mamba-2 layers");
  EXPECT_EQ(census({"layer", "llama-3.1-8b", "--gdn-backend", "eager", "--format", "json"}).code, 0);
}

TEST(GdnCli, RefusesLayerTypesOfTheWrongLengthOrKind) {
  expect_refused(census({"layer", toy_qwen3_next("short.json", {{"layer_types", {"linear_attention"}}})}),
                 "layer_types");
  expect_refused(census({"layer", toy_qwen3_next("kind.json", {{"layer_types", {"linear_attention", "sliding_attention"}}})}),
                 "layer_types");
}

TEST(GdnCli, RefusesAConvKernelOfZero) {
  expect_refused(census({"layer", toy_qwen3_next("conv.json", {{"linear_conv_kernel_dim", 0}})}), "linear_conv_kernel_dim");
}

TEST(GdnCli, RefusesHeadsThatDoNotDivide) {
  expect_refused(census({"layer", toy_qwen3_next("heads.json", {{"linear_num_value_heads", 6}})}),
                 "linear_num_value_heads");
  expect_refused(census({"layer", toy_qwen3_next("tp.json", {{"linear_num_key_heads", 3}, {"linear_num_value_heads", 9}}),
                         "--tp", "2"}),
                 "linear_num_key_heads");
}

// A sparse layer runs Qwen3NextSparseMoeBlock (layer 1 here, mlp_only_layers keeping layer 0 dense).
TEST(GdnCli, MixtureOfExpertsLayersArePriced) {
  const CliRun run = census({"layers", toy_qwen3_next("moe.json", {{"mlp_only_layers", {0}}, {"num_experts", 8},
                                                                   {"num_experts_per_tok", 2}}),
                             "--format", "json"});
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_NE(run.out.find("full_attention_moe"), std::string::npos) << run.out;
  const CliRun layer = census({"layer", toy_qwen3_next("moe1.json", {{"mlp_only_layers", {0}}, {"num_experts", 8},
                                                                     {"num_experts_per_tok", 2}}),
                               "--layer-index", "1", "--seq-length", "64"});
  EXPECT_EQ(layer.code, 0) << layer.err;
}

// Qwen3-Next's experts default to a top 10: a config with fewer experts must say how many a token picks.
TEST(GdnCli, RefusesATopKBeyondTheExperts) {
  expect_refused(census({"layer", toy_qwen3_next("topk.json", {{"mlp_only_layers", {0}}, {"num_experts", 8}})}),
                 "num_experts_per_tok");
}

TEST(GdnCli, LegacyLayerTypeNamesAreRemapped) {
  const CliRun run = census({"layers", toy_qwen3_next("legacy.json", {{"layer_types", {"mamba", "attention"}}}),
                             "--format", "json"});
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_NE(run.out.find("linear_attention"), std::string::npos) << run.out;
}

}  // namespace
}  // namespace census
