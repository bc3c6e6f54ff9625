// Every option of `step`, `plan`, `stack` and `report` at each hostile value: 0, -1, empty, 2^31, 2^63,
// 2^64, NaN and a wrong type ("abc"). Each is refused in one line naming the option, with exit code 2
// and nothing on stdout, or answered (exit 0) where the value is a legal one, and then no number the
// answer prints is 2^63 or more. Which values each option answers is stated below, with why.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "cli_run.h"

namespace census {
namespace {

using testing::CliRun;
using testing::census;

const std::vector<std::string> kHostile = {"0", "-1", "", "2147483648", "9223372036854775808", "18446744073709551616",
                                           "nan", "abc"};

// A toy Llama and a toy Qwen3-MoE: an accepted step or plan runs in milliseconds.
const std::string& toy_llama() {
  static const std::string path = testing::write_test_file(
      "sweep_llama.json", R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 4,
                              "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512})");
  return path;
}

// The numbers an answer prints, as digits (grouped or not, with a fraction or an exponent): none is
// 2^63 or more, none NaN or infinite.
void expect_no_wrapped_number(const std::string& out, const std::string& where) {
  for (size_t i = 0; i < out.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(out[i])) || (i > 0 && std::isalnum(static_cast<unsigned char>(out[i - 1]))))
      continue;
    std::string digits;
    size_t end = i;
    while (end < out.size() && (std::isdigit(static_cast<unsigned char>(out[end])) || out[end] == ',' || out[end] == '.' ||
                                out[end] == 'e' || ((out[end] == '+' || out[end] == '-') && out[end - 1] == 'e')))
      if (out[end++] != ',') digits += out[end - 1];
    EXPECT_LT(std::strtod(digits.c_str(), nullptr), 9223372036854775808.0) << where << ": " << digits;
    i = end;
  }
  for (const char* word : {"nan", "inf"}) EXPECT_EQ(out.find(std::string(" ") + word), std::string::npos) << where;
}

struct Command {
  std::vector<std::string> base;  // the command and what every run of it needs
  std::vector<std::string> options;
  // The option values it answers: (option, value) pairs, each a legal value.
  std::set<std::pair<std::string, std::string>> answers;
  std::set<std::string> paths = {};  // options naming a file, whose refusal may name the file
};

void sweep(const Command& command) {
  for (const std::string& option : command.options) {
    for (const std::string& value : kHostile) {
      std::vector<std::string> args = command.base;
      args.insert(args.end(), {option, value});
      const CliRun run = census(args);
      const std::string where = args[0] + " " + option + " '" + value + "'";
      if (command.answers.contains({option, value})) {
        EXPECT_EQ(run.code, 0) << where << ": " << run.err;
        std::string out = run.out;  // less the value where the answer echoes it (a path: "wrote 9223372036854775808")
        for (size_t at = value.empty() ? std::string::npos : out.find(value); at != std::string::npos; at = out.find(value))
          out.erase(at, value.size());
        expect_no_wrapped_number(out, where);
        continue;
      }
      EXPECT_EQ(run.code, 2) << where << " answered: " << run.out.substr(0, 200);
      EXPECT_TRUE(run.out.empty()) << where;
      EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << where << ": " << run.err;
      // A path that cannot be read is named itself ("abc: cannot be read").
      EXPECT_TRUE(run.err.find(option) != std::string::npos || (command.paths.contains(option) && run.err.find(value) != std::string::npos))
          << where << ": " << run.err;
    }
  }
}

TEST(HostileSweep, EveryOptionOfStep) {
  Command step{{"step", toy_llama(), "--seq-length", "64"},
               {"--seq-length", "--micro-batch-size", "--micro-batches", "--pp", "--stage", "--schedule",
                "--virtual-stages", "--recompute", "--optimizer", "--tp", "--dp", "--zero", "--cp", "--ep",
                "--master-weights", "--grad-dtype", "--experts-implementation", "--cuda-context", "--nccl-buffers",
                "--fragmentation", "--format", "--first-stage-layers", "--last-stage-layers", "--expert-tp",
                "--kernels", "--train-yaml", "--alloc-conf", "--gpu-memory", "--fsdp-wrap"},
               {// Stage 0 of the one stage; ZeRO-0; no bytes of an overhead; no stage's layers set.
                {"--stage", "0"}, {"--zero", "0"}, {"--cuda-context", "0"}, {"--nccl-buffers", "0"},
                {"--fragmentation", "0"}, {"--first-stage-layers", "0"}, {"--last-stage-layers", "0"},
                // A size of 2^31 bytes (2 GiB) is an overhead like any other.
                {"--cuda-context", "2147483648"}, {"--nccl-buffers", "2147483648"}, {"--fragmentation", "2147483648"}},
               {"--train-yaml"}};
  sweep(step);
}

TEST(HostileSweep, EveryOptionOfPlan) {
  Command plan{{"plan", toy_llama(), "--gpus", "2", "--device", "h100", "--seq-length", "64"},
               {"--gpus", "--gpu-memory", "--gpus-per-node", "--seq-length", "--global-batch", "--device",
                "--peak-tflops", "--hbm-gbs", "--link-gbs", "--nic-gbs", "--compute-efficiency", "--top",
                "--master-weights", "--grad-dtype", "--cuda-context", "--nccl-buffers", "--fragmentation", "--format",
                "--calibration", "--overlap", "--layout", "--alloc-conf"},
               {{"--cuda-context", "0"}, {"--nccl-buffers", "0"}, {"--fragmentation", "0"},
                // 2 GiB of a device: a small one, on which the toy still fits.
                {"--gpu-memory", "2147483648"}, {"--cuda-context", "2147483648"}, {"--nccl-buffers", "2147483648"},
                {"--fragmentation", "2147483648"}},
               {"--calibration"}};
  sweep(plan);
}

TEST(HostileSweep, EveryOptionOfStack) {
  Command stack{{"stack", toy_llama(), "--seq-length", "64"},
                {"--seq-length", "--tp", "--format", "--experts-implementation", "--kernels", "--gdn-backend",
                 "--mamba-backend"},
                {}};
  sweep(stack);
}

TEST(HostileSweep, EveryOptionOfReport) {
  // Paths are legal values of --output and --svg: each option's runs write into a directory of their own.
  char previous[4096];
  ASSERT_NE(::getcwd(previous, sizeof previous), nullptr);
  for (const std::string option : {"--output", "--svg", "--layer-index", "--seq-length", "--tp", "--experts-implementation",
                                   "--kernels", "--train-yaml", "--gdn-backend"}) {
    const std::string dir = ::testing::TempDir() + "/" + std::to_string(getpid()) + "_hostile_sweep" + option;
    ASSERT_TRUE(::mkdir(dir.c_str(), 0755) == 0 || errno == EEXIST);
    ASSERT_EQ(::chdir(dir.c_str()), 0);
    Command report{{"report", toy_llama(), "--seq-length", "64"}, {option}, {{"--layer-index", "0"}}, {"--train-yaml"}};
    if (option != "--output") report.base.insert(report.base.end(), {"--output", "r.html"});
    // Every text but the empty one names a file (or a directory for the charts).
    for (const std::string& value : kHostile)
      if (!value.empty()) report.answers.insert({"--output", value}), report.answers.insert({"--svg", value});
    sweep(report);
  }
  ASSERT_EQ(::chdir(previous), 0);
}

}  // namespace
}  // namespace census
