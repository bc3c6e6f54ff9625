// `census stack`: its JSON answer against the oracle's Llama stack case, and its refusals.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_run.h"

namespace census {
namespace {

using testing::CliRun;
CliRun run(std::vector<std::string> args) { return testing::census(std::move(args)); }

// The oracle case's config, written as a config.json.
std::string llama_stack_config() {
  std::ifstream file(std::string(CENSUS_TEST_DATA) + "/oracle/llama_stack_h256_s64.json");
  const nlohmann::json oracle = nlohmann::json::parse(file);
  return testing::write_test_file("llama_stack_config.json", oracle.at("config").dump());
}

TEST(StackCli, JsonListsEachLayerAndEachKind) {
  const CliRun r = run({"stack", llama_stack_config(), "--seq-length", "64", "--format", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json json = nlohmann::json::parse(r.out);
  ASSERT_EQ(json.at("layers").size(), 3u);
  const std::vector<int64_t> kept = {680448, 672256, 672256}, held = {1107012, 1098820, 1098820};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(json.at("layers")[i].at("layer"), i);
    EXPECT_EQ(json.at("layers")[i].at("kind"), "decoder");
    EXPECT_EQ(json.at("layers")[i].at("kept"), kept[i]);
    EXPECT_EQ(json.at("layers")[i].at("held"), held[i]);
  }
  EXPECT_EQ(json.at("kinds").at("decoder").at("working_tp").get<double>(), 6400.000000000004);
}

TEST(StackCli, TpBuildsTheRanksLayers) {
  const CliRun r = run({"stack", llama_stack_config(), "--seq-length", "64", "--tp", "2", "--format", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out).at("layers")[0].at("kept"), 475648);
}

TEST(StackCli, TableNamesEveryLayer) {
  const CliRun r = run({"stack", llama_stack_config(), "--seq-length", "64"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("680,448"), std::string::npos) << r.out;
}

TEST(StackCli, RefusesABadSequenceInOneLine) {
  const CliRun r = run({"stack", llama_stack_config(), "--seq-length", "0"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(r.out.empty());
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

}  // namespace
}  // namespace census

namespace census {
namespace {

std::string glm_stack_config() {
  std::ifstream file(std::string(CENSUS_TEST_DATA) + "/oracle/glm_moe_dsa_stack_h256_s64.json");
  const nlohmann::json oracle = nlohmann::json::parse(file);
  return testing::write_test_file("glm_stack_config.json", oracle.at("config").dump());
}

// GLM-5's shared-indexer layer reads the layer before's top-k: no single-layer command runs it.
TEST(StackOnlyLayers, ASingleLayerCommandIsRefusedInOneLine) {
  for (const char* command : {"layer", "saved-ops", "flops", "traffic", "explain"}) {
    const CliRun r = run({command, glm_stack_config(), "--layer-index", "2", "--seq-length", "64"});
    EXPECT_EQ(r.code, 2) << command;
    EXPECT_TRUE(r.out.empty()) << command;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find("census stack"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("shared"), std::string::npos) << r.err;
  }
  EXPECT_EQ(run({"layer", glm_stack_config(), "--layer-index", "1", "--seq-length", "64"}).code, 0);
}

// activations prices the shared layers' kind through the stack (the oracle's stack record), and the
// other kinds on their first layer as ever.
TEST(StackOnlyLayers, ActivationsTakesTheirKindFromTheStack) {
  const CliRun r = run({"activations", glm_stack_config(), "--seq-length", "64", "--format", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json json = nlohmann::json::parse(r.out);
  const nlohmann::json& shared = json.at("shared_moe");
  EXPECT_EQ(shared.at("saved").get<double>(), 8966.5);
  EXPECT_EQ(shared.at("saved_tp").get<double>(), 10240.0);
  EXPECT_EQ(shared.at("working").get<double>(), 17679.0625);
  EXPECT_EQ(shared.at("working_tp").get<double>(), 10240.0);
  EXPECT_FALSE(shared.contains("selective"));
  EXPECT_TRUE(json.at("full_moe").contains("selective"));
}

}  // namespace
}  // namespace census

