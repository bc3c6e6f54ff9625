// `census stack`: its JSON answer against the oracle's Llama stack case, and its refusals.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/cli.h"

namespace census {
namespace {

struct CliRun {
  int code;
  std::string out;
  std::string err;
};

CliRun run(std::vector<std::string> args) {
  args.insert(args.begin(), "census");
  std::vector<const char*> argv;
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  std::ostringstream out, err;
  const int code = cli::run_cli(static_cast<int>(argv.size()), argv.data(), out, err);
  return {code, out.str(), err.str()};
}

// The oracle case's config, written as a config.json.
std::string llama_stack_config() {
  std::ifstream file(std::string(CENSUS_TEST_DATA) + "/oracle/llama_stack_h256_s64.json");
  const nlohmann::json oracle = nlohmann::json::parse(file);
  const std::string path = ::testing::TempDir() + "/llama_stack_config.json";
  std::ofstream(path) << oracle.at("config").dump();
  return path;
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
