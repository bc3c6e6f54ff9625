#include "cli/options.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "step/step_compose.h"
#include "util/escape.h"

namespace census::cli {
namespace {

bool is_digit(char ch) { return ch >= '0' && ch <= '9'; }

// Wide enough for a size's 19 digits and 18 decimals times a unit (2^40): the byte rule's exact product.
__extension__ typedef __int128 Wide;

std::string integer_range(const IntegerRule& rule) {
  return "give an integer from " + std::to_string(rule.min) + " to " + std::to_string(rule.max);
}

Refusal out_of_range(const IntegerRule& rule, const std::string& shown, bool above) {
  return above ? refuse(rule.flag, shown + " is more than " + std::to_string(rule.max) + ", " + rule.max_is + "; " +
                                       integer_range(rule))
               : refuse(rule.flag, shown + " is less than " + std::to_string(rule.min) + "; " + integer_range(rule));
}

std::string number_range(const NumberRule& rule) {
  return std::string("give a number from ") + figure(rule.min) + " to " + figure(rule.max) +
         (*rule.unit ? " " : "") + rule.unit;
}

std::string bytes_advice() {
  return "give a whole number of bytes, such as 1024, 141GB or 80GiB";
}

// "give a, b or c": the words a choice option takes.
std::string choice_advice(const std::vector<std::string>& choices) {
  std::string words;
  for (size_t i = 0; i < choices.size(); ++i)
    words += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
  return "give " + words;
}

// `text` is a decimal number as the number rule reads it: -?(digits[.digits]|.digits)([eE][+-]?digits)?
bool decimal_syntax(std::string_view text) {
  size_t i = text.size() > 0 && text[0] == '-' ? 1 : 0;
  size_t digits = 0;
  while (i < text.size() && is_digit(text[i])) ++i, ++digits;
  if (i < text.size() && text[i] == '.') {
    ++i;
    while (i < text.size() && is_digit(text[i])) ++i, ++digits;
  }
  if (digits == 0) return false;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
    size_t exponent = 0;
    while (i < text.size() && is_digit(text[i])) ++i, ++exponent;
    if (exponent == 0) return false;
  }
  return i == text.size();
}

}  // namespace

std::string figure(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g", value);
  return buffer;
}

Result<int64_t> parse_integer(const IntegerRule& rule, std::string_view text) {
  if (text.empty()) return refuse(rule.flag, "is empty; " + integer_range(rule) + ", or leave the option out");
  const bool negative = text[0] == '-';
  const std::string_view digits = text.substr(negative ? 1 : 0);
  bool all_digits = !digits.empty();
  for (char ch : digits) all_digits = all_digits && is_digit(ch);
  if (!all_digits) return refuse(rule.flag, echoed(text) + " is not an integer; " + integer_range(rule));
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  // Past 64 bits the text is still an integer, past the range on its side: never wrapped or saturated.
  if (error == std::errc::result_out_of_range) return out_of_range(rule, echoed(text), !negative);
  if (value < rule.min || value > rule.max) return out_of_range(rule, echoed(text), value > rule.max);
  return value;
}

Status check_integer(const IntegerRule& rule, int64_t value) {
  if (value < rule.min || value > rule.max) return out_of_range(rule, std::to_string(value), value > rule.max);
  return {};
}

Result<int64_t> parse_bytes(const std::string& flag, std::string_view text) {
  if (text.empty()) return refuse(flag, "is empty; " + bytes_advice() + ", or leave the option out");
  // The number: digits, then an optional fraction; then the unit, after optional spaces.
  size_t i = 0;
  std::string_view whole, fraction;
  while (i < text.size() && is_digit(text[i])) ++i;
  whole = text.substr(0, i);
  if (i < text.size() && text[i] == '.') {
    const size_t start = ++i;
    while (i < text.size() && is_digit(text[i])) ++i;
    fraction = text.substr(start, i - start);
  }
  if (whole.empty() && fraction.empty()) return refuse(flag, echoed(text) + " is not a size; " + bytes_advice());
  size_t unit_start = i;
  while (unit_start < text.size() && text[unit_start] == ' ') ++unit_start;
  const std::string_view unit = text.substr(unit_start);
  static constexpr std::pair<std::string_view, int64_t> kUnits[] = {
      {"", 1}, {"B", 1}, {"KB", 1000}, {"MB", 1000000}, {"GB", 1000000000}, {"TB", 1000000000000},
      {"KiB", int64_t{1} << 10}, {"MiB", int64_t{1} << 20}, {"GiB", int64_t{1} << 30}, {"TiB", int64_t{1} << 40}};
  int64_t scale = 0;
  for (const auto& [name, bytes] : kUnits)
    if (unit == name) scale = bytes;
  if (scale == 0)
    return refuse(flag, echoed(text) + " has an unknown unit; use B, KB, MB, GB, TB, KiB, MiB, GiB or TiB");
  // Exactly, in integers: bytes = (whole . fraction) x scale, refused unless it is whole.
  while (!whole.empty() && whole.front() == '0') whole.remove_prefix(1);
  while (!fraction.empty() && fraction.back() == '0') fraction.remove_suffix(1);
  const std::string too_large = echoed(text) + " is more than a size Census prices (2^60 bytes); " + bytes_advice();
  if (whole.size() > 19) return refuse(flag, too_large);
  if (fraction.size() > 18)
    return refuse(flag, echoed(text) + " has more decimals than a size needs; " + bytes_advice());
  Wide tenths = 0, power = 1;  // the number x 10^decimals, and 10^decimals
  for (char ch : whole) tenths = tenths * 10 + (ch - '0');
  for (char ch : fraction) tenths = tenths * 10 + (ch - '0'), power *= 10;
  Wide scaled = 0;
  if (__builtin_mul_overflow(tenths, static_cast<Wide>(scale), &scaled)) return refuse(flag, too_large);
  if (scaled % power != 0)
    return refuse(flag, echoed(text) + " is not a whole number of bytes; " + bytes_advice());
  if (scaled / power > kLargestBytes) return refuse(flag, too_large);
  return static_cast<int64_t>(scaled / power);
}

Status check_bytes(const std::string& flag, int64_t value) {
  if (value < 0 || value > kLargestBytes)
    return refuse(flag, std::to_string(value) + " bytes is out of range; give 0 to 2^60 bytes");
  return {};
}

Result<double> parse_number(const NumberRule& rule, std::string_view text) {
  if (text.empty()) return refuse(rule.flag, "is empty; " + number_range(rule) + ", or leave the option out");
  if (!decimal_syntax(text))
    return refuse(rule.flag, echoed(text) + " is not a finite decimal number; " + number_range(rule));
  // Past a double's range (1e400) strtod gives infinity, past the rule's max; below it (1e-400) a
  // number near 0. Census never sets a locale: the decimal point is '.'.
  const double value = std::strtod(std::string(text).c_str(), nullptr);
  if (value > rule.max) return refuse(rule.flag, echoed(text) + " is more than " + figure(rule.max) + "; " + number_range(rule));
  if (value < rule.min) return refuse(rule.flag, echoed(text) + " is less than " + figure(rule.min) + "; " + number_range(rule));
  return value;
}

Status check_number(const NumberRule& rule, double value) {
  if (!std::isfinite(value) || value < rule.min || value > rule.max)
    return refuse(rule.flag, figure(value) + " is not a finite number in range; " + number_range(rule));
  return {};
}

Result<std::string> parse_choice(const std::string& flag, const std::vector<std::string>& choices, std::string_view text) {
  if (text.empty()) return refuse(flag, "is empty; " + choice_advice(choices) + ", or leave the option out");
  for (const std::string& choice : choices)
    if (text == choice) return choice;
  return refuse(flag, echoed(text) + " is not known; " + choice_advice(choices));
}

CLI::Option* add_read_option(CLI::App& app, const std::string& flag, const std::string& help,
                             std::function<Status(std::string_view)> read) {
  return app.add_option_function<std::string>(
      flag,
      [read = std::move(read)](const std::string& text) {
        if (Status status = read(text); !status) throw OptionRefused(status.refusal());
      },
      help);
}

CLI::Option* add_text_option(CLI::App& app, const std::string& flag, std::string& into, const std::string& help,
                             const std::string& advice) {
  return add_read_option(app, flag, help, [flag, advice, &into](std::string_view text) -> Status {
    if (text.empty()) return refuse(flag, "is empty; " + advice);
    into = std::string(text);
    return {};
  });
}

CLI::Option* add_choice_option(CLI::App& app, const std::string& flag, std::string& into,
                               const std::vector<std::string>& choices, const std::string& help) {
  std::string shown = "TEXT:{";
  for (const std::string& choice : choices) shown += (&choice == &choices.front() ? "" : ",") + choice;
  return add_read_option(app, flag, help,
                         [flag, choices, &into](std::string_view text) -> Status {
                           CENSUS_ASSIGN(into, parse_choice(flag, choices, text));
                           return {};
                         })
      ->type_name(shown + "}");
}

}  // namespace census::cli
