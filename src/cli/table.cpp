#include "cli/table.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

namespace census::cli {
namespace {

bool numeric(const std::string& cell) {
  return !cell.empty() && (std::isdigit(static_cast<unsigned char>(cell[0])) || cell[0] == '-');
}

}  // namespace

void Table::print(std::ostream& out) const {
  std::vector<size_t> widths;
  for (const auto& row : rows_) {
    if (widths.size() < row.size()) widths.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  for (size_t r = 0; r < rows_.size(); ++r) {
    std::string line;
    for (size_t i = 0; i < rows_[r].size(); ++i) {
      const std::string& cell = rows_[r][i];
      const std::string pad(widths[i] - cell.size(), ' ');
      const bool right = r > 0 && i > 0 && numeric(cell);
      line += (i ? "  " : "") + (right ? pad + cell : cell + (i + 1 < rows_[r].size() ? pad : ""));
    }
    out << line << '\n';
  }
}

std::string grouped(int64_t value) {
  std::string digits = std::to_string(value < 0 ? -value : value);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return value < 0 ? "-" + out : out;
}

std::string decimal(double value) {
  char buffer[64];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buffer, sizeof buffer, "%.*g", precision, value);
    if (std::strtod(buffer, nullptr) == value) break;
  }
  std::string text(buffer);
  // Large integers print in exponent form at low precision: write them out.
  if (text.find('e') != std::string::npos && value == std::floor(value) && std::fabs(value) < 1e18)
    text = std::to_string(static_cast<int64_t>(value));
  return text;
}

std::string human_bytes(double bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (std::fabs(bytes) >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, unit == 0 ? "%.0f %s" : "%.2f %s", bytes, kUnits[unit]);
  return buffer;
}

}  // namespace census::cli
