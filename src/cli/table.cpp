#include "cli/table.h"

#include <algorithm>
#include <cctype>
#include <charconv>
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
  // The fewest significant digits that read back as the value, printed as %.*g prints them. The
  // shortest round-trip form gives the count to start from (one try, mostly): printing and parsing
  // 17 precisions each was most of a command's time after its censuses.
  char buffer[64];
  int precision = 1;
  if (std::isfinite(value) && value != 0) {
    const std::to_chars_result shortest =
        std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::scientific);
    precision = 0;
    for (const char* c = buffer; c < shortest.ptr && *c != 'e'; ++c) precision += std::isdigit(static_cast<unsigned char>(*c)) ? 1 : 0;
    precision = std::clamp(precision, 1, 17);
  }
  for (; precision <= 17; ++precision) {
    const std::to_chars_result printed =
        std::to_chars(buffer, buffer + sizeof buffer - 1, value, std::chars_format::general, precision);
    *printed.ptr = '\0';
    double back = 0;
    std::from_chars(buffer, printed.ptr, back);
    if (back == value) break;
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
