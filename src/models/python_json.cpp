#include "models/python_json.h"

#include <cctype>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace census {
namespace {

// Each bare word is rewritten, outside strings, to a string that holds a control character (which a
// JSON string can only hold escaped, so a config's own text practically never equals it); the parser's
// callback turns those strings back into the doubles.
struct Word {
  std::string_view python;
  std::string_view marker;  // as it stands in the rewritten text
  std::string_view value;   // the parsed marker string
  double number;
};
const Word kWords[] = {
    {"-Infinity", "\"\\u0001-Infinity\"", "\x01-Infinity", -std::numeric_limits<double>::infinity()},
    {"Infinity", "\"\\u0001Infinity\"", "\x01Infinity", std::numeric_limits<double>::infinity()},
    {"NaN", "\"\\u0001NaN\"", "\x01NaN", std::numeric_limits<double>::quiet_NaN()},
};

bool word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// `text` with every bare Infinity, -Infinity and NaN outside strings replaced by its marker.
std::string rewrite_words(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < text.size()) out += text[++i];
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
      out += c;
      continue;
    }
    const Word* match = nullptr;
    if (i == 0 || !word_char(text[i - 1])) {
      for (const Word& word : kWords) {
        const size_t end = i + word.python.size();
        if (text.substr(i, word.python.size()) == word.python && (end == text.size() || !word_char(text[end]))) {
          match = &word;
          break;
        }
      }
    }
    if (match != nullptr) {
      out += match->marker;
      i += match->python.size() - 1;
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

nlohmann::json parse_python_json(std::string_view text) {
  const std::string rewritten = rewrite_words(text);
  // Parsed without a callback (nlohmann's callback parser copies values recursively, which a value
  // nested 10^5 deep overflows), then the markers restored by an iterative walk.
  nlohmann::json parsed = nlohmann::json::parse(rewritten, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || rewritten.size() == text.size()) return parsed;
  std::vector<nlohmann::json*> pending{&parsed};
  while (!pending.empty()) {
    nlohmann::json* value = pending.back();
    pending.pop_back();
    if (value->is_structured()) {
      for (auto& item : *value) pending.push_back(&item);
      continue;
    }
    if (!value->is_string()) continue;
    const std::string& string = value->get_ref<const std::string&>();
    if (string.empty() || string[0] != '\x01') continue;
    for (const Word& word : kWords) {
      if (string != word.value) continue;
      *value = word.number;  // `string` refers into the value this replaces: stop looking at it
      break;
    }
  }
  return parsed;
}

}  // namespace census
