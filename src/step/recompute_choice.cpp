#include "step/recompute_choice.h"

#include <algorithm>

namespace census {

std::string recompute_name(Recompute r) {
  switch (r) {
    case Recompute::kSelective: return "selective";
    case Recompute::kFull: return "full";
    case Recompute::kFullReentrant: return "full-reentrant";
    case Recompute::kTorchtitanOp: return "torchtitan-op";
    case Recompute::kNone: break;
  }
  return "none";
}

namespace {

constexpr std::string_view kLayerPolicy = "torchtitan-layer:";

}  // namespace

Recompute RecomputeChoice::of_kind(std::string_view kind) const {
  for (const auto& [name, mode] : by_kind)
    if (name == kind) return mode;
  return all;
}

std::string recompute_text(const RecomputeChoice& c) {
  if (c.every_nth_layer > 0) return std::string(kLayerPolicy) + std::to_string(c.every_nth_layer);
  std::string text = recompute_name(c.all);
  for (const auto& [kind, mode] : c.by_kind) text += "," + kind + "=" + recompute_name(mode);
  return text;
}

Result<RecomputeChoice> parse_recompute(const ModelConfig& config, std::string_view text, const std::string& flag) {
  auto mode = [&](std::string_view name) -> Result<Recompute> {
    for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull, Recompute::kFullReentrant,
                        Recompute::kTorchtitanOp})
      if (name == recompute_name(r)) return r;
    return refuse(flag, echoed(std::string(name)) +
                            " is not known; use none, selective, full, full-reentrant, torchtitan-op or "
                            "torchtitan-layer:N, or KIND=MODE items");
  };
  if (text.starts_with(kLayerPolicy)) {  // torchtitan's per-layer policy: for every layer, alone
    const std::string_view digits = text.substr(kLayerPolicy.size());
    int64_t n = 0;
    bool number = !digits.empty() && digits.size() <= 7;
    for (char c : digits) number = number && c >= '0' && c <= '9';
    if (number)
      for (char c : digits) n = n * 10 + (c - '0');
    if (!number || n < 1 || n > kLargestLayerPeriod)
      return refuse(flag, echoed(std::string(text)) + ": give torchtitan-layer:N with N a whole number of layers from "
                                                       "1 to 2^20 (every N-th layer checkpointed), alone");
    RecomputeChoice choice;
    choice.every_nth_layer = n;
    return choice;
  }
  std::vector<std::string> kinds;  // the model's, in order, each once
  for (const std::string& kind : layer_kinds(config))
    if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) kinds.push_back(kind);
  RecomputeChoice choice;
  std::vector<std::pair<std::string, Recompute>> named;
  size_t at = 0;
  for (bool first = true; at <= text.size(); first = false) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string_view item = text.substr(at, comma - at);
    at = comma + 1;
    const size_t equals = item.find('=');
    if (equals == std::string_view::npos) {
      if (!first) return refuse(flag, "only its first item may name no kind; write KIND=MODE after it");
      auto all = mode(item);
      CENSUS_TRY(all);
      choice.all = *all;
      continue;
    }
    const std::string kind(item.substr(0, equals));
    if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) {
      std::string known;
      for (const std::string& k : kinds) known += (known.empty() ? "" : ", ") + k;
      return refuse(flag, echoed(kind) + " is not a layer kind of " + config.model_type + "; its kinds: " + known);
    }
    for (const auto& [seen, unused] : named)
      if (seen == kind) return refuse(flag, "names kind " + kind + " twice; give each kind once");
    auto m = mode(item.substr(equals + 1));
    CENSUS_TRY(m);
    named.emplace_back(kind, *m);
  }
  for (const std::string& kind : kinds)
    for (const auto& [name, m] : named)
      if (name == kind && m != choice.all) choice.by_kind.emplace_back(kind, m);
  return choice;
}

}  // namespace census
