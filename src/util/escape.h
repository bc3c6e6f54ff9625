// File: escape.h
// The one rule for echoing a user's text in a refusal: a refusal is one line, so whatever the text
// holds (a newline, a carriage return, a NUL, a terminal escape) is shown escaped, and a long text is
// cut. Every refusal that quotes a config value, an option, a path or a file's key goes through here.
//
//   refuse("model_type", echoed(name) + " is not priced");   // 'llama\nfalcon' is not priced
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>

namespace census {

// The longest text a refusal echoes, in bytes of the original: enough to recognise it.
inline constexpr size_t kShownLength = 64;

// The length of the UTF-8 character starting at text[i], or 0 where the bytes there are not one.
inline size_t utf8_length(std::string_view text, size_t i) {
  const auto lead = static_cast<unsigned char>(text[i]);
  const size_t length = lead >= 0xc2 && lead <= 0xdf ? 2 : lead >= 0xe0 && lead <= 0xef ? 3
                        : lead >= 0xf0 && lead <= 0xf4 ? 4 : 0;
  if (length == 0 || i + length > text.size()) return 0;
  for (size_t k = 1; k < length; ++k)
    if ((static_cast<unsigned char>(text[i + k]) & 0xc0) != 0x80) return 0;
  return length;
}

// `text` with every control character (and DEL) escaped: \n, \r, \t, \0, else \xNN; so is a byte
// that is not part of a UTF-8 character. UTF-8 characters are kept.
inline std::string escaped(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte >= 0x20 && byte < 0x7f) {
      out += text[i];
      continue;
    }
    if (const size_t length = byte >= 0x80 ? utf8_length(text, i) : 0; length > 0) {
      out += text.substr(i, length);
      i += length - 1;
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

// A user's value as a refusal shows it: in single quotes, escaped, cut to kShownLength bytes (at a
// character's start) with "..." where longer.
inline std::string echoed(std::string_view text) {
  size_t end = std::min(text.size(), kShownLength);
  while (end > 0 && end < text.size() && (static_cast<unsigned char>(text[end]) & 0xc0) == 0x80) --end;
  std::string out(1, '\'');
  out += escaped(text.substr(0, end));
  out += end < text.size() ? "...'" : "'";
  return out;
}

}  // namespace census
