// decimal(): the fewest significant digits (as %.*g prints them) that read back as the value, checked
// against printing and parsing every precision from 1, over integers, per-token fractions, tiny and
// huge values, the values on either side of powers of ten, subnormals and random bit patterns.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

#include "report/table.h"

namespace census {
namespace {

std::string every_precision(double value) {
  char buffer[64];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buffer, sizeof buffer, "%.*g", precision, value);
    if (std::strtod(buffer, nullptr) == value) break;
  }
  std::string text(buffer);
  if (text.find('e') != std::string::npos && value == std::floor(value) && std::fabs(value) < 1e18)
    text = std::to_string(static_cast<int64_t>(value));
  return text;
}

TEST(Decimal, EqualsTheFewestDigitsThatReadBack) {
  std::vector<double> values = {0.0, -0.0, 1.0, -1.0, 0.5, 10632, 2060.09375, 1e-5, 1e-4, 0.0001234, 1e21, 1.5e20,
                                100000, 1500000, 123456789.5, 0.1, 0.2, 0.3, 1.0 / 3, 2.0 / 3, 1e300, 5e-324,
                                1.7976931348623157e308, 0.00390625, 437503.9920654297, 129428.021484375};
  for (int e = -20; e <= 20; ++e) {
    const double p = std::pow(10.0, e);
    values.insert(values.end(), {p, std::nextafter(p, 0.0), std::nextafter(p, 1e308), -p});
  }
  std::mt19937_64 random(18);
  for (int i = 0; i < 20000; ++i) {
    values.push_back(static_cast<double>(random() % 1000000007) / static_cast<double>(1 + random() % 4096));
    values.push_back(std::ldexp(static_cast<double>(random() >> 11), static_cast<int>(random() % 200) - 100));
  }
  // Any bit pattern, and values whose shortest form is not %.*g's at its own precision (16 digits
  // read back where the nearest 16-digit decimal does not).
  for (int i = 0; i < 20000; ++i) {
    const uint64_t bits = random();
    double value = 0;
    std::memcpy(&value, &bits, sizeof value);
    if (std::isfinite(value)) values.push_back(value);
  }
  values.insert(values.end(), {7.1202363472230444e-307, 7.1746481373430634e-43, -7.8545495444763625e-90, 1e-310,
                               -2.5e-320, 123.456, -0.000123, 99999.5, 1e15 + 0.5, 4503599627370497.0});
  for (double value : values) EXPECT_EQ(decimal(value), every_precision(value)) << value;
}

}  // namespace
}  // namespace census
