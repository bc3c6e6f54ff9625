#include "step/recompute_choice.h"

#include <algorithm>

namespace census {

std::string recompute_name(Recompute r) {
  switch (r) {
    case Recompute::kSelective: return "selective";
    case Recompute::kFull: return "full";
    case Recompute::kNone: break;
  }
  return "none";
}

Recompute RecomputeChoice::of_kind(std::string_view kind) const {
  for (const auto& [name, mode] : by_kind)
    if (name == kind) return mode;
  return all;
}

std::string recompute_text(const RecomputeChoice& c) {
  std::string text = recompute_name(c.all);
  for (const auto& [kind, mode] : c.by_kind) text += "," + kind + "=" + recompute_name(mode);
  return text;
}

Result<RecomputeChoice> parse_recompute(const ModelConfig& config, std::string_view text, const std::string& flag) {
  auto mode = [&](std::string_view name) -> Result<Recompute> {
    for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull})
      if (name == recompute_name(r)) return r;
    return refuse(flag, echoed(std::string(name)) + " is not known; use none, selective or full, or KIND=MODE items");
  };
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
