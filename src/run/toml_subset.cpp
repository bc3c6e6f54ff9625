#include "run/toml_subset.h"

#include <cmath>
#include <cstdlib>
#include <set>

#include "util/escape.h"

namespace census {
namespace {

constexpr int kDeepestArray = 8;  // the deepest arrays nest: torchtitan's deepest field is a list of lists

bool ascii_digit(char c) { return c >= '0' && c <= '9'; }
bool bare_key_character(char c) {
  return ascii_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '-';
}

// Digits with single underscores between them (TOML's), from `at`; the end of the run, or npos where none.
size_t digits(const std::string& s, size_t at) {
  if (at >= s.size() || !ascii_digit(s[at])) return std::string::npos;
  while (at < s.size() && (ascii_digit(s[at]) || (s[at] == '_' && at + 1 < s.size() && ascii_digit(s[at + 1])))) ++at;
  return at;
}

class Reader {
 public:
  Reader(const std::string& text, const std::string& name) : t_(text), name_(name) {}

  Result<TomlDocument> read() {
    TomlDocument doc;
    std::string table;
    std::set<std::string> keys, tables;
    for (;;) {
      skip_space_and_lines();
      if (end()) return doc;
      const int64_t line = line_;
      if (peek() == '[') {
        ++at_;
        if (peek() == '[') return error("arrays of tables are not read");
        CENSUS_ASSIGN(table, key());
        if (peek() != ']') return error("a table header is not closed with ']'");
        ++at_;
        if (!tables.insert(table).second || keys.contains(table))
          return error("[" + echoed(table) + "] is defined twice");
        doc.tables.push_back({table, line});
        CENSUS_TRY(end_of_line());
        continue;
      }
      CENSUS_ASSIGN(const std::string name, key());
      if (peek() != '=') return error("'=' is expected after a key");
      ++at_;
      skip_blanks();
      CENSUS_ASSIGN(TomlValue value, read_value(0));
      const std::string path = table.empty() ? name : table + "." + name;
      if (!keys.insert(path).second || tables.contains(path)) return error(echoed(path) + " is defined twice");
      doc.entries.push_back({path, std::move(value), line});
      CENSUS_TRY(end_of_line());
    }
  }

 private:
  bool end() const { return at_ >= t_.size(); }
  char peek() const { return end() ? '\0' : t_[at_]; }
  Refusal error(const std::string& what) const {
    return refuse(name_ + ":" + std::to_string(line_),
                  "is not TOML Census reads (" + what + "); give torchtitan's TOML job config");
  }

  void skip_blanks() {
    while (peek() == ' ' || peek() == '\t') ++at_;
  }
  void skip_comment() {
    if (peek() == '#')
      while (!end() && t_[at_] != '\n') ++at_;
  }
  bool newline() {
    if (peek() == '\r' && at_ + 1 < t_.size() && t_[at_ + 1] == '\n') ++at_;
    if (peek() != '\n') return false;
    ++at_;
    ++line_;
    return true;
  }
  // Blanks, comments and line ends: between lines, and inside an array.
  void skip_space_and_lines() {
    do {
      skip_blanks();
      skip_comment();
    } while (newline());
  }
  Status end_of_line() {
    skip_blanks();
    skip_comment();
    if (end() || newline()) return {};
    return error("unexpected text after a value or header");
  }

  // A bare key, or a dotted one (its segments joined by '.', blanks around the dots allowed).
  Result<std::string> key() {
    std::string out;
    for (;;) {
      skip_blanks();
      if (peek() == '"' || peek() == '\'') return error("quoted keys are not read");
      const size_t begin = at_;
      while (!end() && bare_key_character(t_[at_])) ++at_;
      if (at_ == begin) return error("a key is expected");
      out += t_.substr(begin, at_ - begin);
      skip_blanks();
      if (peek() != '.') return out;
      ++at_;
      out += '.';
    }
  }

  Result<TomlValue> read_value(int depth) {
    const char c = peek();
    if (c == '"' || c == '\'') {
      if (t_.compare(at_, 3, std::string(3, c)) == 0) return error("multi-line strings are not read");
      CENSUS_ASSIGN(std::string text, c == '"' ? basic_string() : literal_string());
      return TomlValue{std::move(text)};
    }
    if (c == '{') return error("inline tables are not read");
    if (c != '[') return scalar();
    if (depth >= kDeepestArray) return error("arrays nest deeper than 8");
    ++at_;
    TomlValue::Array items;
    for (;;) {
      skip_space_and_lines();
      if (peek() == ']') break;
      CENSUS_ASSIGN(TomlValue item, read_value(depth + 1));
      items.push_back(std::move(item));
      skip_space_and_lines();
      if (peek() == ',') {
        ++at_;
        continue;
      }
      if (peek() != ']') return error("',' or ']' is expected in an array");
      break;
    }
    ++at_;
    return TomlValue{std::move(items)};
  }

  Result<std::string> basic_string() {
    ++at_;
    std::string out;
    for (;;) {
      if (end() || t_[at_] == '\n') return error("a string is not closed on its line");
      const char c = t_[at_++];
      if (c == '"') return out;
      if (c == '\\') {
        if (end()) return error("a string is not closed on its line");
        const char escape = t_[at_++];
        switch (escape) {
          case '"': out += '"'; break;
          case '\\': out += '\\'; break;
          case 'b': out += '\b'; break;
          case 't': out += '\t'; break;
          case 'n': out += '\n'; break;
          case 'f': out += '\f'; break;
          case 'r': out += '\r'; break;
          case 'u':
          case 'U': CENSUS_TRY(unicode_escape(escape == 'u' ? 4 : 8, out)); break;
          default: return error("an unknown escape in a string");
        }
        continue;
      }
      if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f) return error("a control character in a string");
      out += c;
    }
  }

  Status unicode_escape(int length, std::string& out) {
    uint32_t code = 0;
    for (int i = 0; i < length; ++i) {
      const char h = peek();
      const int v = ascii_digit(h) ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
      if (v < 0) return error("a \\u escape needs hexadecimal digits");
      code = code * 16 + static_cast<uint32_t>(v);
      ++at_;
    }
    if (code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return error("a \\u escape that is no character");
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xc0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3f));
    } else if (code < 0x10000) {
      out += static_cast<char>(0xe0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (code & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (code >> 18));
      out += static_cast<char>(0x80 | ((code >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (code & 0x3f));
    }
    return {};
  }

  Result<std::string> literal_string() {
    ++at_;
    const size_t begin = at_;
    for (;;) {
      if (end() || t_[at_] == '\n') return error("a string is not closed on its line");
      const char c = t_[at_];
      if (c == '\'') break;
      if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f) return error("a control character in a string");
      ++at_;
    }
    std::string out = t_.substr(begin, at_ - begin);
    ++at_;
    return out;
  }

  // true, false, a decimal integer, or a float (decimal, or inf and nan).
  Result<TomlValue> scalar() {
    const size_t begin = at_;
    while (!end() && (bare_key_character(t_[at_]) || t_[at_] == '+' || t_[at_] == '.')) ++at_;
    const std::string token = t_.substr(begin, at_ - begin);
    if (token == "true" || token == "false") return TomlValue{token == "true"};
    for (const char* special : {"inf", "+inf", "-inf", "nan", "+nan", "-nan"})
      if (token == special)
        return TomlValue{token.find("nan") != std::string::npos ? std::nan("") : token[0] == '-' ? -HUGE_VAL : HUGE_VAL};
    size_t i = token.empty() || (token[0] != '+' && token[0] != '-') ? 0 : 1;
    const size_t integral = digits(token, i);
    if (integral == std::string::npos || (token[i] == '0' && integral > i + 1))
      return error("a value is expected: a string, a decimal number, true, false or an array, not " + echoed(token));
    size_t k = integral;
    bool fractional = false;
    if (k < token.size() && token[k] == '.') {
      k = digits(token, k + 1);
      if (k == std::string::npos) return error("a float needs digits after its point: " + echoed(token));
      fractional = true;
    }
    if (k < token.size() && (token[k] == 'e' || token[k] == 'E')) {
      size_t e = k + 1;
      if (e < token.size() && (token[e] == '+' || token[e] == '-')) ++e;
      k = digits(token, e);
      if (k == std::string::npos) return error("a float needs digits in its exponent: " + echoed(token));
      fractional = true;
    }
    if (k != token.size()) return error("a value is expected, not " + echoed(token));
    std::string plain;
    for (const char c : token)
      if (c != '_') plain += c;
    if (fractional) return TomlValue{std::strtod(plain.c_str(), nullptr)};
    int64_t value = 0;
    const bool negative = plain[0] == '-';
    for (size_t d = (plain[0] == '+' || plain[0] == '-') ? 1 : 0; d < plain.size(); ++d) {
      const int64_t digit = plain[d] - '0';
      if (value > (INT64_MAX - digit) / 10) return error("an integer past 64 bits: " + echoed(token));
      value = value * 10 + digit;
    }
    return TomlValue{negative ? -value : value};
  }

  const std::string& t_;
  const std::string& name_;
  size_t at_ = 0;
  int64_t line_ = 1;
};

}  // namespace

Result<TomlDocument> parse_toml_subset(const std::string& text, const std::string& name) {
  return Reader(text, name).read();
}

}  // namespace census
