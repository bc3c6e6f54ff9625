// File: escape.h
// The one rule for echoing a user's text in a refusal: a refusal is one line, so whatever the text
// holds (a newline, a carriage return, a NUL, a terminal escape) is shown escaped, and a long text is
// cut. Every refusal that quotes a config value, an option, a path or a file's key goes through here.
//
//   refuse("model_type", echoed(name) + " is not priced");   // 'llama\nfalcon' is not priced
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace census {

// The longest text a refusal echoes, in characters of the original: enough to recognise it.
inline constexpr size_t kShownLength = 64;

// `text` with every control character (and DEL) escaped: \n, \r, \t, \0, else \xNN. Other bytes,
// UTF-8 included, are kept.
inline std::string escaped(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    const auto byte = static_cast<unsigned char>(ch);
    if (byte >= 0x20 && byte != 0x7f) {
      out += ch;
      continue;
    }
    out += '\\';
    switch (byte) {
      case '\n': out += 'n'; break;
      case '\r': out += 'r'; break;
      case '\t': out += 't'; break;
      case '\0': out += '0'; break;
      default:
        out += 'x';
        out += kHex[byte >> 4];
        out += kHex[byte & 0xf];
    }
  }
  return out;
}

// A user's value as a refusal shows it: in single quotes, escaped, cut to kShownLength characters
// with "..." where longer.
inline std::string echoed(std::string_view text) {
  const bool cut = text.size() > kShownLength;
  std::string out(1, '\'');
  out += escaped(text.substr(0, cut ? kShownLength : text.size()));
  out += cut ? "...'" : "'";
  return out;
}

}  // namespace census
