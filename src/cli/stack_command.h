// File: stack_command.h
// `census stack CONFIG`: the whole decoder's census (census/stack_census.h), each layer's kept and
// held bytes at the rank --tp builds, and each kind's record from TP 1 and TP 2.
#pragma once

#include <ostream>

#include "cli/request.h"

namespace census::cli {

void command_stack(const Request& request, std::ostream& out);

}  // namespace census::cli
