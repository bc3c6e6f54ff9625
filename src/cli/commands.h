// File: commands.h
// Each census command: run its measurement on a checked Request and print it as a table or JSON.
#pragma once

#include <ostream>

#include "cli/request.h"

namespace census::cli {

void run_command(const Request& request, std::ostream& out);
void list_models(Format format, std::ostream& out);

}  // namespace census::cli
