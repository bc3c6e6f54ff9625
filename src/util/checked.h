// File: checked.h
// Checked: 64-bit integer arithmetic that remembers an overflow instead of wrapping. The census's
// byte and FLOP counts are products of config sizes; every product a guard weighs is formed here, so
// none can wrap unseen into a small or negative number that passes the guard.
//
//   Checked flops = Checked{2} * seq_length * width * width;
//   if (flops.overflows(limit)) return refuse(...);
#pragma once

#include <cstdint>

namespace census {

class Checked {
 public:
  constexpr Checked(int64_t value) : value_(value) {}  // NOLINT(google-explicit-constructor)

  // Whether the value wrapped, or went past `limit`, somewhere along the way.
  constexpr bool overflows(int64_t limit = INT64_MAX) const { return wrapped_ || value_ > limit; }
  // The value; meaningful only where it does not overflow.
  constexpr int64_t value() const { return value_; }

  friend constexpr Checked operator*(Checked a, Checked b) {
    Checked out(0);
    out.wrapped_ = a.wrapped_ || b.wrapped_ || __builtin_mul_overflow(a.value_, b.value_, &out.value_);
    return out;
  }
  friend constexpr Checked operator+(Checked a, Checked b) {
    Checked out(0);
    out.wrapped_ = a.wrapped_ || b.wrapped_ || __builtin_add_overflow(a.value_, b.value_, &out.value_);
    return out;
  }
  friend constexpr Checked max(Checked a, Checked b) {
    if (a.wrapped_ || b.wrapped_) return a.wrapped_ ? a : b;
    return a.value_ >= b.value_ ? a : b;
  }

 private:
  int64_t value_;
  bool wrapped_ = false;
};

}  // namespace census
