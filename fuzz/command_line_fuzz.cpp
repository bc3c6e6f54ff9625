// Fuzzing the command line of `census step` and `census plan`: any option vector, run as the command
// line runs it, answers (exit 0) or refuses in one line (exit 2, nothing on stdout). An answer prints
// no number of 2^63 or more (bytes, counts, seconds, with their units), no NaN or infinity, and a step
// no negative number: a count that wrapped would show as one of these.
//
// The input is NUL-separated words: the first picks the command (its first byte's bit 0: step or
// plan; bit 1: a plan without --device h100 before the arguments), the second the model (its first
// byte, even or odd: a toy Llama or a toy Qwen3-MoE, so that an accepted vector runs in
// milliseconds), the rest are the arguments after the model. The dictionary
// command_line.dict holds the options and the values that broke them once.
#include <unistd.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli.h"

namespace {

// A toy model's config.json, written once: two layers, small widths.
std::string toy_config(const char* name, const char* json) {
  const std::string path = "/tmp/census_command_line_fuzz_" + std::to_string(getpid()) + "_" + name + ".json";
  std::ofstream(path) << json;
  return path;
}

const std::string& toy_llama() {
  static const std::string path = toy_config(
      "llama", R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 4,
                  "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512})");
  return path;
}

const std::string& toy_moe() {
  static const std::string path = toy_config(
      "qwen3_moe", R"({"model_type": "qwen3_moe", "hidden_size": 64, "moe_intermediate_size": 32, "num_hidden_layers": 4,
                      "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 512,
                      "num_experts": 8, "num_experts_per_tok": 2})");
  return path;
}

[[noreturn]] void fail(const char* what, const std::string& text) {
  std::fprintf(stderr, "%s:\n%s\n", what, text.c_str());
  std::abort();
}

// The factor a unit after a number stands for ("GiB" 2^30, "ms" 1e-3); 1 where the next word is none.
double unit_factor(const std::string& text, size_t at) {
  while (at < text.size() && text[at] == ' ') ++at;
  static const std::pair<const char*, double> kUnits[] = {
      {"PiB", 1125899906842624.0}, {"TiB", 1099511627776.0}, {"GiB", 1073741824.0}, {"MiB", 1048576.0},
      {"KiB", 1024.0}};
  for (const auto& [unit, factor] : kUnits)
    if (text.compare(at, std::char_traits<char>::length(unit), unit) == 0) return factor;
  return 1;
}

// Every number `text` prints, grouped ("1,024") or decimal ("3.5e+18"), times its unit; and whether a
// negative one or a NaN or infinity appears.
void check_numbers(const std::string& text, bool negatives_allowed) {
  const auto is_digit = [](char ch) { return ch >= '0' && ch <= '9'; };
  const auto is_word = [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'; };
  for (size_t i = 0; i < text.size(); ++i) {
    // A word that is nan or inf.
    if (std::isalpha(static_cast<unsigned char>(text[i])) && (i == 0 || !is_word(text[i - 1]))) {
      size_t end = i;
      while (end < text.size() && is_word(text[end])) ++end;
      std::string word = text.substr(i, end - i);
      for (char& ch : word) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      if (word == "nan" || word == "inf" || word == "infinity") fail("a NaN or infinity is printed", text);
      i = end - 1;
      continue;
    }
    if (!is_digit(text[i]) || (i > 0 && (is_word(text[i - 1]) || text[i - 1] == '.'))) continue;
    const bool negative = i > 0 && text[i - 1] == '-' && (i < 2 || !is_word(text[i - 2]));
    std::string digits;
    size_t end = i;
    while (end < text.size() && (is_digit(text[end]) || (text[end] == ',' && end + 1 < text.size() && is_digit(text[end + 1]))))
      if (text[end++] != ',') digits += text[end - 1];
    if (end < text.size() && text[end] == '.')
      for (digits += text[end++]; end < text.size() && is_digit(text[end]);) digits += text[end++];
    if (end + 1 < text.size() && (text[end] == 'e' || text[end] == 'E') &&
        (is_digit(text[end + 1]) || text[end + 1] == '+' || text[end + 1] == '-'))
      for (digits += text[end++], digits += text[end++]; end < text.size() && is_digit(text[end]);) digits += text[end++];
    const double value = std::strtod(digits.c_str(), nullptr) * unit_factor(text, end);
    if (!(value < 9223372036854775808.0)) fail("a number of 2^63 or more is printed", text);
    if (negative && value != 0 && !negatives_allowed) fail("a negative number is printed", text);
    i = end - 1;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> words(1);
  for (size_t i = 0; i < size && words.size() <= 24; ++i) {
    if (data[i] == 0) words.emplace_back();
    else words.back() += static_cast<char>(data[i]);
  }
  const bool plan = !words[0].empty() && (static_cast<unsigned char>(words[0][0]) & 1);
  const bool moe = words.size() > 1 && !words[1].empty() && (static_cast<unsigned char>(words[1][0]) & 1);
  std::vector<std::string> args = {"census", plan ? "plan" : "step", moe ? toy_moe() : toy_llama()};
  if (plan && !(static_cast<unsigned char>(words[0][0]) & 2)) args.insert(args.end(), {"--device", "h100"});
  args.insert(args.end(), words.begin() + (words.size() > 1 ? 2 : 1), words.end());
  std::vector<const char*> argv;
  for (const std::string& arg : args) argv.push_back(arg.c_str());

  std::ostringstream out, err;
  const int code = census::cli::run_cli(static_cast<int>(argv.size()), argv.data(), out, err);
  if (code == 2) {
    const std::string line = err.str();
    if (!out.str().empty()) fail("a refusal printed an answer too", out.str());
    if (line.empty() || line.back() != '\n' || line.find('\n') != line.size() - 1) fail("a refusal is not one line", line);
    for (size_t i = 0; i + 1 < line.size(); ++i)
      if (static_cast<unsigned char>(line[i]) < 0x20 || line[i] == 0x7f) fail("a refusal holds a control character", line);
    return 0;
  }
  if (code != 0) fail("an exit code other than 0 and 2", std::to_string(code) + ": " + err.str());
  // --help's answer is text, not numbers.
  if (out.str().rfind("Census:", 0) == 0 || out.str().find("Usage:") != std::string::npos) return 0;
  // A plan that fits nothing states how far the layouts are over (a negative headroom).
  check_numbers(out.str(), /*negatives_allowed=*/plan);
  return 0;
}
