// File: table.h
// A plain text table: a header row, then rows; numbers right-aligned, text left-aligned.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace census {

class Table {
 public:
  explicit Table(std::vector<std::string> header) : rows_{std::move(header)} {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void print(std::ostream& out) const;

 private:
  std::vector<std::vector<std::string>> rows_;
};

// 1234567 -> "1,234,567"
std::string grouped(int64_t value);
// A per-token byte count as the reference reports it: shortest exact decimal ("10632", "2060.09375").
std::string decimal(double value);
// 1536 -> "1.5 KiB"
std::string human_bytes(double bytes);

}  // namespace census
