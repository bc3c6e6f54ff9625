// File: fuzz_check.h
// What every fuzz target checks of a refusal besides not crashing: it is one line (no control
// character at all), as the command line prints it.
#pragma once

#include <cstdlib>
#include <cstdio>
#include <string>

#include "util/result.h"

namespace census::fuzz {

inline void expect_one_line(const Refusal& refusal) {
  const std::string message = refusal.message();
  for (const char ch : message) {
    const auto byte = static_cast<unsigned char>(ch);
    if (byte < 0x20 || byte == 0x7f) {
      std::fprintf(stderr, "refusal is not one line: %s\n", message.c_str());
      std::abort();
    }
  }
  if (refusal.field.empty() && refusal.advice.empty()) std::abort();
}

}  // namespace census::fuzz
