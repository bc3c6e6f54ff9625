// File: toml_subset.h
// The TOML that torchtitan's job files are written in, read strictly: table headers of bare keys
// ([a.b]), key = value lines (bare or dotted bare keys), and values that are basic or literal strings on
// one line, decimal integers, floats, true or false, and arrays of those (over lines, with comments and a
// trailing comma). Everything else TOML has (inline tables, arrays of tables, multi-line strings, dates,
// quoted keys) is refused by name: no job file torchtitan ships uses it. Census reads the subset itself:
// Debian's TOML libraries (toml++ 3.3, toml11 3.7) reach undefined behaviour on fuzzed input.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "util/result.h"

namespace census {

struct TomlValue {
  using Array = std::vector<TomlValue>;
  std::variant<std::string, int64_t, double, bool, Array> value;
  bool is_string() const { return std::holds_alternative<std::string>(value); }
  bool is_integer() const { return std::holds_alternative<int64_t>(value); }
  bool is_float() const { return std::holds_alternative<double>(value); }
  bool is_bool() const { return std::holds_alternative<bool>(value); }
  bool is_array() const { return std::holds_alternative<Array>(value); }
  const std::string& string() const { return std::get<std::string>(value); }
  int64_t integer() const { return std::get<int64_t>(value); }
  bool boolean() const { return std::get<bool>(value); }
  const Array& array() const { return std::get<Array>(value); }
};

// One key's value, by its whole dotted path ("training.seq_len"), in the file's order; `line` is 1-based.
struct TomlEntry {
  std::string path;
  TomlValue value;
  int64_t line = 0;
};

// A table header ("[quantize.linear.float8]") with its line, in the file's order.
struct TomlTable {
  std::string path;
  int64_t line = 0;
};

struct TomlDocument {
  std::vector<TomlTable> tables;
  std::vector<TomlEntry> entries;
};

// The document of `text`; refused, naming `name` and the line, where it is not TOML of the subset above,
// or a key or table is defined twice.
Result<TomlDocument> parse_toml_subset(const std::string& text, const std::string& name);

}  // namespace census
