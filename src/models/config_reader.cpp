#include "models/config_reader.h"

#include <algorithm>
#include <cmath>

#include "util/escape.h"

namespace census {
namespace {

// Sizes beyond this cannot be priced: byte and FLOP counts must stay exact in 64-bit integers.
constexpr int64_t kLargestSize = int64_t{1} << 32;
// The longest name a text field holds (model types, activations and implementations are short).
constexpr size_t kLargestText = 256;
// How deep shown() opens nested arrays and objects; deeper ones show as [...] or {...}.
constexpr int kShownDepth = 2;
constexpr size_t kShownChars = 40;

// A string as JSON shows it, quoted and escaped; bytes that are not UTF-8 (a string cut mid-character,
// or one from Python) shown as U+FFFD rather than thrown.
std::string dumped(const std::string& text) {
  return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// `value` appended to `out`, containers opened `depth` more levels. The recursion is bounded by
// kShownDepth, not by the value, and stops once `out` is long enough to be cut.
void append_shown(const nlohmann::json& value, int depth, std::string& out) {
  if (value.is_array() || value.is_object()) {
    const bool array = value.is_array();
    if (value.empty() || depth == 0) {
      out += array ? (value.empty() ? "[]" : "[...]") : (value.empty() ? "{}" : "{...}");
      return;
    }
    out += array ? '[' : '{';
    bool first = true;
    for (auto item = value.begin(); item != value.end() && out.size() <= kShownChars; ++item) {
      out += first ? "" : ",";
      first = false;
      if (!array) out += dumped(item.key()) + ":";
      append_shown(item.value(), depth - 1, out);
    }
    out += array ? ']' : '}';
    return;
  }
  if (value.is_number_float() && !std::isfinite(value.get<double>())) {
    const double number = value.get<double>();
    out += std::isnan(number) ? "NaN" : number > 0 ? "Infinity" : "-Infinity";
    return;
  }
  if (value.is_string()) {
    // A scalar's dump escapes its control characters; cut a long string before dumping all of it.
    const std::string& text = value.get_ref<const std::string&>();
    out += dumped(text.substr(0, std::min(text.size(), kShownChars + 1)));
    return;
  }
  out += value.dump();
}

// Whether `value` is an integer, stated as one or as a float with no fraction (4096.0), and which.
std::optional<int64_t> integer_of(const nlohmann::json& value) {
  if (value.is_number_unsigned()) {
    const uint64_t n = value.get<uint64_t>();
    return n > static_cast<uint64_t>(INT64_MAX) ? std::nullopt : std::optional<int64_t>(static_cast<int64_t>(n));
  }
  if (value.is_number_integer()) return value.get<int64_t>();
  if (!value.is_number_float()) return std::nullopt;
  const double number = value.get<double>();
  // Past 2^53 a double no longer holds every integer; past 2^63 the cast is undefined.
  if (!std::isfinite(number) || std::fabs(number) > 9007199254740992.0 || number != std::floor(number))
    return std::nullopt;
  return static_cast<int64_t>(number);
}

}  // namespace

Status check_per_layer(const std::string& field, int64_t stated, std::optional<int64_t> num_layers, PerLayer rule) {
  if (stated > kLargestLayerCount)
    return refuse(field, "states " + std::to_string(stated) +
                             " layers, more than a census prices (at most 2^20 = 1048576); fix the config");
  if (!num_layers) {
    if (stated == 0) return refuse(field, "is empty; state one entry per layer");
    return {};
  }
  if (stated == *num_layers || (rule == PerLayer::kCut && stated > *num_layers)) return {};
  return refuse(field, "states " + std::to_string(stated) + " layers, but num_hidden_layers is " +
                           std::to_string(*num_layers) + (rule == PerLayer::kCut ? " (a longer list is cut to it)" : "") +
                           "; state one entry per layer");
}

std::string shown(const nlohmann::json& value) {
  std::string text;
  append_shown(value, kShownDepth, text);
  return escaped(text.size() > kShownChars ? text.substr(0, kShownChars - 3) + "..." : text);
}

Result<int64_t> ConfigReader::size(const char* name, std::optional<int64_t> fallback) const {
  if (!has(name)) {
    if (fallback) return *fallback;
    return wrong(name, "missing from the config; add it (a positive integer)");
  }
  const nlohmann::json& value = json_.at(name);
  const std::optional<int64_t> n = integer_of(value);
  if (!n && value.is_number_unsigned())
    return wrong(name, shown(value) + " is too large for exact 64-bit byte counts (at most 2^32); fix the config");
  if (!n || *n <= 0) return wrong(name, "must be a positive integer, not " + shown(value) + "; fix the config");
  if (*n > kLargestSize)
    return wrong(name, std::to_string(*n) + " is too large for exact 64-bit byte counts (at most 2^32); fix the config");
  return *n;
}

Result<int64_t> ConfigReader::count(const char* name, int64_t fallback) const {
  if (!has(name)) return fallback;
  const nlohmann::json& value = json_.at(name);
  const std::optional<int64_t> n = value.is_number_float() ? std::nullopt : integer_of(value);
  if (!n || *n < 0 || *n > kLargestSize)
    return wrong(name, "must be a non-negative integer, not " + shown(value) + "; fix the config");
  return *n;
}

Result<std::vector<int64_t>> ConfigReader::layer_indices(const char* name, int64_t num_layers) const {
  std::vector<int64_t> out;
  if (!has(name)) return out;
  const nlohmann::json& value = json_.at(name);
  if (!value.is_array()) return wrong(name, "must be a list of layer indices, not " + shown(value) + "; fix the config");
  for (const nlohmann::json& entry : value) {
    const std::optional<int64_t> index = entry.is_number_float() ? std::nullopt : integer_of(entry);
    if (!index || *index < 0 || *index >= num_layers)
      return wrong(name, "has " + shown(entry) + ", not a layer index in [0, " + std::to_string(num_layers) +
                             "); fix the config");
    out.push_back(*index);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Result<std::vector<std::string>> ConfigReader::layer_kinds(const char* name, int64_t num_layers,
                                                          std::initializer_list<std::string_view> kinds,
                                                          PerLayer rule) const {
  const nlohmann::json& value = json_.at(name);
  std::string known;
  for (std::string_view kind : kinds) known += (known.empty() ? "" : ", ") + std::string(kind);
  if (!value.is_array()) return wrong(name, "must be a list of layer kinds (" + known + "), not " + shown(value) + "; fix the config");
  CENSUS_TRY(check_per_layer(prefix_ + name, static_cast<int64_t>(value.size()), num_layers, rule));
  std::vector<std::string> out;
  for (const nlohmann::json& entry : value) {
    if (static_cast<int64_t>(out.size()) == num_layers) break;  // a cut list: the rest is never read
    const std::string* text = entry.is_string() ? &entry.get_ref<const std::string&>() : nullptr;
    if (text == nullptr || std::find(kinds.begin(), kinds.end(), std::string_view(*text)) == kinds.end())
      return wrong(name, "has " + shown(entry) + " at layer " + std::to_string(out.size()) + "; known kinds: " + known);
    out.push_back(*text);
  }
  return out;
}

Result<std::vector<bool>> ConfigReader::layer_flags(const char* name, int64_t num_layers, PerLayer rule) const {
  const nlohmann::json& value = json_.at(name);
  if (!value.is_array()) return wrong(name, "must be a list of 0 and 1, one per layer, not " + shown(value) + "; fix the config");
  CENSUS_TRY(check_per_layer(prefix_ + name, static_cast<int64_t>(value.size()), num_layers, rule));
  std::vector<bool> out;
  for (const nlohmann::json& entry : value) {
    if (static_cast<int64_t>(out.size()) == num_layers) break;
    if (!entry.is_number_integer() || (entry != 0 && entry != 1))
      return wrong(name, "has " + shown(entry) + " at layer " + std::to_string(out.size()) + "; each entry is 0 or 1");
    out.push_back(entry == 1);
  }
  return out;
}

Result<double> ConfigReader::positive_number(const char* name, double fallback) const {
  if (!has(name)) return fallback;
  const nlohmann::json& value = json_.at(name);
  if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() <= 0)
    return wrong(name, "must be a finite positive number, not " + shown(value) + "; fix the config");
  return value.get<double>();
}

Result<double> ConfigReader::probability(const char* name, double fallback) const {
  if (!has(name)) return fallback;
  const nlohmann::json& value = json_.at(name);
  if (!value.is_number() || value.get<double>() < 0 || value.get<double>() >= 1)
    return refuse(name, "must be a probability in [0, 1), not " + shown(value) + "; fix the config");
  return value.get<double>();
}

Result<bool> ConfigReader::flag(const char* name, bool fallback) const {
  if (!has(name)) return fallback;
  const nlohmann::json& value = json_.at(name);
  if (!value.is_boolean()) return wrong(name, "must be true or false, not " + shown(value) + "; fix the config");
  return value.get<bool>();
}

Result<std::string> ConfigReader::text(const char* name, const std::string& fallback) const {
  if (!has(name)) return fallback;
  const nlohmann::json& value = json_.at(name);
  if (!value.is_string()) return wrong(name, "must be a string, not " + shown(value) + "; fix the config");
  const std::string& text = value.get_ref<const std::string&>();
  const bool control = std::any_of(text.begin(), text.end(), [](char ch) {
    return static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f;
  });
  if (control || text.size() > kLargestText)
    return wrong(name, "must be a name (no control characters, at most 256 long), not " + echoed(text) +
                           "; fix the config");
  return text;
}

Result<std::optional<ConfigReader>> ConfigReader::section(const char* name) const {
  if (!has(name)) return std::optional<ConfigReader>();
  const nlohmann::json& value = json_.at(name);
  if (!value.is_object()) return wrong(name, "must be an object, not " + shown(value) + "; fix the config");
  return std::optional<ConfigReader>(ConfigReader(value, prefix_ + name + "."));
}

}  // namespace census
