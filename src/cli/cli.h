// File: cli.h
// The census command line: `census <command> CONFIG [options]`. Prints the answer on `out`; a refusal
// is one line on `err` and exit code 2.
#pragma once

#include <ostream>

namespace census::cli {

int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace census::cli
