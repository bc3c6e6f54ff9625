// A bad value of the run gets the same one line from `census step` and `census plan`: the options both take
// are read by the same rules (parse_choice, check_optimizer), so their refusals cannot drift apart. (Python's
// census_step and census_plan give the same line, with the arguments' names: tests/python/test_trainer_run.py.)
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli_run.h"

namespace census {
namespace {

using testing::CliRun;
using testing::census;

TEST(RunRefusalCli, StepAndPlanRefuseABadRunAlike) {
  const std::vector<std::vector<std::string>> bad = {
      {"--optimizer", "adam"},
      {"--optimizer", "adafactor", "--optimizer-impl", "fused"},
      {"--master-weights", "fp16"},
      {"--grad-dtype", "fp8"},
      {"--loss", "foo"},
  };
  for (const std::vector<std::string>& options : bad) {
    std::vector<std::string> step = {"step", "llama-3.1-8b", "--seq-length", "128"};
    std::vector<std::string> plan = {"plan", "llama-3.1-8b", "--gpus", "8", "--gpu-memory", "80GiB", "--seq-length", "128"};
    step.insert(step.end(), options.begin(), options.end());
    plan.insert(plan.end(), options.begin(), options.end());
    const CliRun stepped = census(step);
    const CliRun planned = census(plan);
    EXPECT_EQ(stepped.code, 2) << options[0];
    EXPECT_EQ(planned.code, 2) << options[0];
    EXPECT_TRUE(stepped.out.empty() && planned.out.empty()) << options[0];
    EXPECT_EQ(stepped.err, planned.err) << options[0];
    EXPECT_NE(stepped.err.find(options[0]), std::string::npos) << stepped.err;
    EXPECT_EQ(std::count(stepped.err.begin(), stepped.err.end(), '\n'), 1) << stepped.err;
  }
}

}  // namespace
}  // namespace census
