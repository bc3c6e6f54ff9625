// File: result.h
// Refusals as values. A census that cannot price its input returns a Refusal naming the field at fault
// and what the user should do; only cli/ turns it into one printed line and exit code 2.
//
//   Result<int64_t> heads = read_positive(config, "num_attention_heads");
//   CENSUS_TRY(heads);                       // returns the refusal to the caller
//   int64_t n = *heads;
//   CENSUS_ASSIGN(int64_t layers, r.size("num_hidden_layers", 32));   // the same in one line
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace census {

// Refusal: why a census cannot run. `field` names what is wrong (a config field, an option, a file);
// `advice` says what to do about it.
struct Refusal {
  std::string field;
  std::string advice;

  std::string message() const { return field.empty() ? advice : field + ": " + advice; }
};

// Result<T>: a T, or the Refusal that stopped it.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Refusal refusal) : state_(std::move(refusal)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }
  const Refusal& refusal() const { return std::get<1>(state_); }
  T& operator*() { return std::get<0>(state_); }
  const T& operator*() const { return std::get<0>(state_); }
  T* operator->() { return &std::get<0>(state_); }
  const T* operator->() const { return &std::get<0>(state_); }
  T take() { return std::move(std::get<0>(state_)); }

 private:
  std::variant<T, Refusal> state_;
};

// Status: success, or a Refusal.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Refusal refusal) : refusal_(std::move(refusal)) {}  // NOLINT(google-explicit-constructor)
  bool ok() const { return !refusal_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Refusal& refusal() const { return *refusal_; }

 private:
  std::optional<Refusal> refusal_;
};

inline Refusal refuse(std::string field, std::string advice) { return Refusal{std::move(field), std::move(advice)}; }

}  // namespace census

// Pass a refusal up in one line: CENSUS_TRY(expr) returns expr's Refusal from the enclosing function.
#define CENSUS_TRY(expr)                               \
  do {                                                 \
    auto&& census_try_value_ = (expr);                 \
    if (!census_try_value_.ok()) return census_try_value_.refusal(); \
  } while (0)

// Read a value or pass its refusal up, in one line: CENSUS_ASSIGN(c.hidden_size, r.size("hidden_size",
// 4096)) assigns the value; CENSUS_ASSIGN(const bool bias, r.flag(...)) declares it. A statement, not
// an expression: never the body of a braceless if.
#define CENSUS_ASSIGN(lhs, expr) CENSUS_ASSIGN_IMPL_(CENSUS_CONCAT_(census_result_, __LINE__), lhs, expr)
#define CENSUS_CONCAT_(a, b) CENSUS_CONCAT_INNER_(a, b)
#define CENSUS_CONCAT_INNER_(a, b) a##b
#define CENSUS_ASSIGN_IMPL_(tmp, lhs, expr)          \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.refusal();               \
  lhs = tmp.take()
