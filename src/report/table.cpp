#include "report/table.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>

namespace census {
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

namespace {

// Large integers print in exponent form at low precision: write them out.
std::string integer_if_exponent(std::string text, double value) {
  if (text.find('e') != std::string::npos && value == std::floor(value) && std::fabs(value) < 1e18)
    return std::to_string(static_cast<int64_t>(value));
  return text;
}

// Note [Floating to_chars]: the standard defines to_chars and from_chars of a double by printf's
// %.*g and %.*e and strtod in the C locale. emscripten's libc++ (LLVM 14, the browser page's) has no
// floating-point to_chars or from_chars: there they are printf and strtod, which give the same text.
// (CENSUS_PRINTF_DECIMALS builds that path anywhere, for its test: decimal_printf_test.)
#if defined(__cpp_lib_to_chars) && !defined(CENSUS_PRINTF_DECIMALS)
char* print_general(char* first, char* last, double value, int precision) {
  return std::to_chars(first, last, value, std::chars_format::general, precision).ptr;
}
// The shortest form that reads back as the value, in exponent form.
char* print_shortest_scientific(char* first, char* last, double value) {
  return std::to_chars(first, last, value, std::chars_format::scientific).ptr;
}
double read_double(const char* first, const char* last) {
  double value = 0;
  std::from_chars(first, last, value);
  return value;
}
#else
double read_double(const char* first, const char* last) { return std::strtod(std::string(first, last).c_str(), nullptr); }
char* print_general(char* first, char* last, double value, int precision) {
  return first + std::snprintf(first, static_cast<size_t>(last - first), "%.*g", precision, value);
}
// The nearest decimal of each length reads back first at the shortest length: that one.
char* print_shortest_scientific(char* first, char* last, double value) {
  int length = 0;
  for (int digits = 0; digits <= 16; ++digits) {
    length = std::snprintf(first, static_cast<size_t>(last - first), "%.*e", digits, value);
    if (read_double(first, first + length) == value) break;
  }
  return first + length;
}
#endif

// Print at each precision from `precision` up, as %.*g prints, until the text reads back as the value.
std::string first_precision_reading_back(double value, int precision) {
  char buffer[64];
  for (; precision <= 17; ++precision) {
    char* end = print_general(buffer, buffer + sizeof buffer - 1, value, precision);
    *end = '\0';
    if (read_double(buffer, end) == value) break;
  }
  return integer_if_exponent(buffer, value);
}

}  // namespace

std::string decimal(double value) {
  // The fewest significant digits that read back as the value, printed as %.*g prints them. The
  // shortest round-trip form (to_chars) has that count, P. Where P <= 15 and the value is normal, %.*g's
  // P digits are the shortest form's own: P-digit decimals lie more than an ulp apart, so only one is
  // within half an ulp of the value, and it is both the nearest and the shortest. The shortest form is
  // then only laid out as %g lays it out, with no printing and parsing back (most of a command's time
  // after its censuses, at about 1,300 instructions a number). Otherwise try each precision from P.
  if (value == 0) return std::signbit(value) ? "-0" : "0";
  if (!std::isfinite(value)) return first_precision_reading_back(value, 1);
  // An integer below 2^53 is its own shortest form, and %g writes it out in full (or the exponent form
  // is written out, as below).
  if (value == std::floor(value) && std::fabs(value) < 9007199254740992.0) return std::to_string(static_cast<int64_t>(value));
  char buffer[64];
  const char* end = print_shortest_scientific(buffer, buffer + sizeof buffer, value);
  const std::string_view text(buffer, static_cast<size_t>(end - buffer));
  const size_t e = text.find('e');
  const bool negative = text[0] == '-';
  std::string digits;
  for (size_t i = negative ? 1 : 0; i < e; ++i)
    if (text[i] != '.') digits += text[i];
  const int precision = static_cast<int>(digits.size());
  if (precision > 15 || std::fabs(value) < std::numeric_limits<double>::min())
    return first_precision_reading_back(value, precision);
  int exponent = 0;
  std::from_chars(text.data() + e + (text[e + 1] == '+' ? 2 : 1), text.data() + text.size(), exponent);
  // %g: the exponent form where the exponent is below -4 or at least the precision, as to_chars
  // wrote it; else positional, trailing zeros dropped (the shortest form has none).
  if (exponent < -4 || exponent >= precision) return integer_if_exponent(std::string(text), value);
  std::string out(negative ? "-" : "");
  if (exponent >= 0) {
    out.append(digits, 0, static_cast<size_t>(exponent) + 1);
    if (precision > exponent + 1) out.append(".").append(digits, static_cast<size_t>(exponent) + 1);
  } else {
    out.append("0.").append(static_cast<size_t>(-exponent - 1), '0').append(digits);
  }
  return out;
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

}  // namespace census
