#include "alloc/alloc_conf.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cstdlib>
#include <vector>

namespace census::alloc {
namespace {

constexpr std::string_view kField = "--alloc-conf";
constexpr std::string_view kKeys =
    "max_split_size_mb, max_non_split_rounding_mb, roundup_power2_divisions, expandable_segments, "
    "garbage_collection_threshold, backend, release_lock_on_cudamalloc, pinned_use_cuda_host_register, "
    "pinned_num_register_threads, pinned_use_background_threads, pinned_reserve_segment_size_mb, "
    "graph_capture_record_stream_reuse";

Refusal bad(const std::string& advice) { return refuse(std::string(kField), advice); }

// ConfigTokenizer: "," ":" "[" "]" are tokens of their own; every other run of characters is one token,
// spaces dropped.
std::vector<std::string> tokens_of(std::string_view text) {
  std::vector<std::string> tokens;
  std::string word;
  for (char c : text) {
    if (c == ',' || c == ':' || c == '[' || c == ']') {
      if (!word.empty()) tokens.push_back(std::move(word));
      word.clear();
      tokens.emplace_back(1, c);
    } else if (c != ' ') {
      word += c;
    }
  }
  if (!word.empty()) tokens.push_back(std::move(word));
  return tokens;
}

class Reader {
 public:
  explicit Reader(std::vector<std::string> tokens) : tokens_(std::move(tokens)) {}
  bool done() const { return i_ >= tokens_.size(); }
  const std::string& key() { return tokens_[i_++]; }
  bool at(std::string_view token) const { return i_ < tokens_.size() && tokens_[i_] == token; }
  Status expect(std::string_view token, const std::string& after) {
    if (at(token)) {
      ++i_;
      return {};
    }
    return bad("expected '" + std::string(token) + "' after " + after + (done() ? ", found the end" : ", found " + echoed(tokens_[i_])));
  }
  // A value token: none where the text ends or a separator stands.
  Result<std::string> value(const std::string& key) {
    if (done() || tokens_[i_] == "," || tokens_[i_] == ":" || tokens_[i_] == "[" || tokens_[i_] == "]")
      return bad(key + " has no value");
    return tokens_[i_++];
  }

 private:
  std::vector<std::string> tokens_;
  size_t i_ = 0;
};

// A whole number (toSizeT): digits only, within int64; a minus sign is refused as negative.
Result<int64_t> whole(const std::string& key, const std::string& text) {
  if (!text.empty() && text[0] == '-') return bad(key + ":" + echoed(text) + " is negative; give a whole number, 0 or more");
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error == std::errc::result_out_of_range) return bad(key + ":" + echoed(text) + " is too large");
  if (error != std::errc() || end != text.data() + text.size())
    return bad(key + ":" + echoed(text) + " is not a whole number");
  return value;
}

Result<bool> flag(const std::string& key, Reader& r) {
  CENSUS_TRY(r.expect(":", key));
  CENSUS_ASSIGN(const std::string text, r.value(key));
  if (text != "True" && text != "False") return bad(key + ":" + echoed(text) + ": give True or False");
  return text == "True";
}

// max_split_size_mb and max_non_split_rounding_mb: "CachingAllocator option max_split_size_mb too
// small, must be >= 20" (kLargeBuffer / kMB); a size beyond what 64 bits hold as bytes is no limit.
Result<int64_t> megabytes_at_least_20(const std::string& key, Reader& r) {
  CENSUS_TRY(r.expect(":", key));
  CENSUS_ASSIGN(const std::string text, r.value(key));
  CENSUS_ASSIGN(const int64_t mb, whole(key, text));
  if (mb < kLargeBuffer / kMiB)
    return bad(key + ":" + text + " is below PyTorch's floor of 20 (MiB); give 20 or more");
  if (mb > kNoSplitLimit / kMiB) return kNoSplitLimit;
  return mb * kMiB;
}

bool power_of_two(int64_t v) { return v > 0 && std::has_single_bit(static_cast<uint64_t>(v)); }

// roundup_power2_divisions: N (every interval), or [B:N,...,>:N] with B a power-of-two boundary in MiB
// (its interval, and every one below the first boundary), ">" every interval after the last one; N a
// power of two (0 in the list: no rounding there).
Status divisions(AllocConf& conf, Reader& r) {
  const std::string key = "roundup_power2_divisions";
  CENSUS_TRY(r.expect(":", key));
  auto& out = conf.roundup_power2_divisions;
  out.fill(0);
  if (!r.at("[")) {
    CENSUS_ASSIGN(const std::string text, r.value(key));
    CENSUS_ASSIGN(const int64_t n, whole(key, text));
    if (!power_of_two(n)) return bad(key + ":" + text + ": the divisions must be a power of 2");
    out.fill(n);
    return {};
  }
  CENSUS_TRY(r.expect("[", key + ":"));
  bool first = true;
  size_t last_index = 0;
  while (!r.at("]") && !r.done()) {
    CENSUS_ASSIGN(const std::string boundary, r.value(key));
    CENSUS_TRY(r.expect(":", key + " boundary " + echoed(boundary)));
    CENSUS_ASSIGN(const std::string text, r.value(key));
    CENSUS_ASSIGN(const int64_t n, whole(key, text));
    if (n != 0 && !power_of_two(n)) return bad(key + ": " + text + " divisions: give a power of 2, or 0 for none");
    if (boundary == ">") {
      for (size_t i = last_index + 1; i < out.size(); ++i) out[i] = n;
    } else {
      CENSUS_ASSIGN(const int64_t mb, whole(key, boundary));
      if (!power_of_two(mb)) return bad(key + ": the boundary " + boundary + " (MiB) must be a power of 2");
      const size_t index = std::min<size_t>(static_cast<size_t>(std::bit_width(static_cast<uint64_t>(mb)) - 1), out.size() - 1);
      if (first) {
        for (size_t i = 0; i < index; ++i) out[i] = n;
        first = false;
      }
      out[index] = n;
      last_index = index;
    }
    if (r.done()) break;
    if (!r.at("]")) CENSUS_TRY(r.expect(",", key + " entry"));
  }
  if (!r.at("]")) return bad(key + ": the list has no closing ']'");
  return r.expect("]", key);
}

Result<double> threshold(const std::string& key, Reader& r) {
  CENSUS_TRY(r.expect(":", key));
  CENSUS_ASSIGN(const std::string text, r.value(key));
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) return bad(key + ":" + echoed(text) + " is not a number");
  if (!(v > 0 && v < 1)) return bad(key + ":" + text + ": give a number between 0 and 1 (both excluded)");
  return v;
}

}  // namespace

Result<AllocConf> parse_alloc_conf(std::string_view text) {
  AllocConf conf;
  conf.text = std::string(text);
  Reader r(tokens_of(text));
  while (!r.done()) {
    const std::string key = r.key();
    if (key == "max_split_size_mb") {
      CENSUS_ASSIGN(conf.max_split_size, megabytes_at_least_20(key, r));
    } else if (key == "max_non_split_rounding_mb") {
      CENSUS_ASSIGN(conf.max_non_split_rounding_size, megabytes_at_least_20(key, r));
    } else if (key == "roundup_power2_divisions") {
      CENSUS_TRY(divisions(conf, r));
    } else if (key == "expandable_segments") {
      CENSUS_ASSIGN(conf.expandable_segments, flag(key, r));
    } else if (key == "garbage_collection_threshold") {
      CENSUS_ASSIGN(conf.garbage_collection_threshold, threshold(key, r));
    } else if (key == "backend") {
      CENSUS_TRY(r.expect(":", key));
      CENSUS_ASSIGN(const std::string backend, r.value(key));
      if (backend == "cudaMallocAsync")
        return bad("backend:cudaMallocAsync is the CUDA driver's own allocator; Census simulates the native caching "
                   "allocator (backend:native, the default)");
      if (backend != "native") return bad("backend:" + echoed(backend) + " is not known; use native");
    } else if (key == "release_lock_on_cudamalloc" || key == "pinned_use_cuda_host_register" ||
               key == "pinned_use_background_threads" || key == "graph_capture_record_stream_reuse") {
      CENSUS_TRY(flag(key, r));
    } else if (key == "pinned_num_register_threads") {
      CENSUS_TRY(r.expect(":", key));
      CENSUS_ASSIGN(const std::string value, r.value(key));
      CENSUS_ASSIGN(const int64_t n, whole(key, value));
      if (!power_of_two(n) || n > 128) return bad(key + ":" + value + ": give a power of 2, at most 128");
    } else if (key == "pinned_reserve_segment_size_mb") {
      CENSUS_TRY(r.expect(":", key));
      CENSUS_ASSIGN(const std::string value, r.value(key));
      CENSUS_ASSIGN(const int64_t mb, whole(key, value));
      if (mb <= 0) return bad(key + ":" + value + ": give a size above 0");
    } else {
      return bad(echoed(key) + " is not a key of PyTorch's caching allocator; use " + std::string(kKeys));
    }
    if (!r.done()) CENSUS_TRY(r.expect(",", key + "'s value"));
  }
  return conf;
}

}  // namespace census::alloc
