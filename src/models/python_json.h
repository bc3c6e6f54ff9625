// File: python_json.h
// JSON as Python's json module writes it. Transformers saves a config with json.dumps, which writes
// a float infinity or NaN as the bare words Infinity, -Infinity and NaN (allow_nan=True): the Mamba-2
// configs' time_step_limit is [0.0, Infinity] by default. Strict JSON, and so nlohmann's parser, has
// no such literals; Census reads them as Python's json.loads does, as the doubles they stand for.
// A field that must be a size and holds one is still refused (ConfigReader::size).
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

namespace census {

// The document `text`, or a discarded value where it is not JSON (with Python's three words allowed).
nlohmann::json parse_python_json(std::string_view text);

}  // namespace census
