// File: commands.h
// Each census command: run its measurement on a checked Request and print it as a table or JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>

#include "census/activations.h"
#include "cli/request.h"

namespace census::cli {

void run_command(const Request& request, std::ostream& out);
void list_models(Format format, std::ostream& out);
// A layer kind's record as `activations --format json` prints it.
nlohmann::ordered_json activations_json(const KindActivations& record);

}  // namespace census::cli
