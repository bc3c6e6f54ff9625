// Every command on every shipped config (configs/*.json, compiled in): each answers (exit 0, its JSON
// parses, its numbers positive), so a config that stops working, or a family whose model the step or
// the stack no longer builds, is caught. A layer command runs the first layer that can run alone (a
// DeepSeek-V4 layer never can: its layer commands are refused in one line, as the family states).
// Sizes keep the suite quick: 1,024 tokens, and a plan on 2,048 devices, where even the trillion-
// parameter models fit (where nothing fits, the search for the smallest memory takes minutes). The
// numbers themselves are checked against the oracles elsewhere.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli/shipped_models.h"
#include "cli_run.h"
#include "cli/request.h"

namespace census {
namespace {

using testing::census;

std::vector<std::string> shipped_names() {
  std::vector<std::string> names;
  for (const cli::ShippedModel& model : cli::shipped_models()) names.emplace_back(model.name);
  return names;
}

class ShippedConfig : public ::testing::TestWithParam<std::string> {};

// The first layer a single-layer command can run, or -1 where none can.
int64_t first_lone_layer(const std::string& name) {
  auto config = cli::resolve_model(name);
  if (!config) return -1;
  for (int64_t i = 0; i < config->num_hidden_layers; ++i)
    if (config->family->stack_only == nullptr || config->family->stack_only(*config, i) == nullptr) return i;
  return -1;
}

bool every_layer_runs_alone(const std::string& name) {
  auto config = cli::resolve_model(name);
  for (int64_t i = 0; i < config->num_hidden_layers; ++i)
    if (config->family->stack_only != nullptr && config->family->stack_only(*config, i) != nullptr) return false;
  return true;
}

void expect_json(const testing::CliRun& run, const std::string& what) {
  ASSERT_EQ(run.code, 0) << what << ": " << run.err;
  EXPECT_TRUE(run.err.empty()) << what << ": " << run.err;
  EXPECT_FALSE(nlohmann::json::parse(run.out, nullptr, false).is_discarded()) << what;
}

TEST_P(ShippedConfig, EveryCommandAnswers) {
  const std::string name = GetParam();
  ASSERT_TRUE(cli::resolve_model(name)) << name;
  const std::vector<std::string> small = {"--seq-length", "1024", "--format", "json"};
  auto with = [&](std::vector<std::string> args) {
    args.insert(args.end(), small.begin(), small.end());
    return args;
  };
  const int64_t layer = first_lone_layer(name);
  for (const char* command : {"layer", "saved-ops", "flops", "traffic", "explain"}) {
    const auto run = census(with({command, name, "--layer-index", std::to_string(std::max<int64_t>(layer, 0))}));
    if (layer < 0) {
      EXPECT_EQ(run.code, 2) << command << " " << name;
      EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
    } else {
      expect_json(run, std::string(command) + " " + name);
    }
  }
  for (const char* command : {"activations", "stack", "parameters", "output", "layers", "tp-config"})
    expect_json(census(with({command, name})), std::string(command) + " " + name);
  const auto step = census(with({"step", name}));
  expect_json(step, "step " + name);
  if (step.code == 0) {
    EXPECT_GT(nlohmann::json::parse(step.out).at("peak").at("bytes").get<int64_t>(), 0) << name;
  }
  expect_json(census(with({"step", name, "--micro-batch-size", "2", "--micro-batches", "2"})), "step b2 " + name);
  const auto plan = census({"plan", name, "--gpus", "2048", "--device", "h100", "--seq-length", "1024", "--format", "json"});
  // The plan times each layer alone: a model with a layer that runs only inside its forward is refused.
  if (every_layer_runs_alone(name)) {
    expect_json(plan, "plan " + name);
  } else {
    EXPECT_EQ(plan.code, 2) << name;
    EXPECT_EQ(std::count(plan.err.begin(), plan.err.end(), '\n'), 1) << plan.err;
  }
}

INSTANTIATE_TEST_SUITE_P(Configs, ShippedConfig, ::testing::ValuesIn(shipped_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string id = info.param;
                           for (char& c : id)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return id;
                         });

}  // namespace
}  // namespace census
