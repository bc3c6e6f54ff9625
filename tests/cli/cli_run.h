// Running the census command line in-process, as a test does: the arguments after `census`, the exit
// code and what it wrote to stdout and stderr.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cli/cli.h"

namespace census::testing {

struct CliRun {
  int code;
  std::string out;
  std::string err;
};

inline CliRun census(std::vector<std::string> args) {
  args.insert(args.begin(), "census");
  std::vector<const char*> argv;
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  std::ostringstream out, err;
  const int code = cli::run_cli(static_cast<int>(argv.size()), argv.data(), out, err);
  return {code, out.str(), err.str()};
}

// A file written for one test, named for this process too: ctest may run two tests at once.
inline std::string write_test_file(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + std::to_string(getpid()) + "_" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// The command refused in one line on stderr naming `named`, with exit code 2 and nothing on stdout.
inline void expect_refused_line(const std::vector<std::string>& args, const std::string& named) {
  const CliRun run = census(args);
  EXPECT_EQ(run.code, 2) << named;
  EXPECT_TRUE(run.out.empty()) << named;
  EXPECT_NE(run.err.find(named), std::string::npos) << run.err;
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
}

}  // namespace census::testing
