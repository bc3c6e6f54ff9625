// census: the command line. See README.md for the commands.
#include <iostream>

#include "cli/cli.h"

int main(int argc, char** argv) { return census::cli::run_cli(argc, argv, std::cout, std::cerr); }
