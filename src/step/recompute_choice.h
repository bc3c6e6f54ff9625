// File: recompute_choice.h
// Activation checkpointing as a run chooses it: one mode for every decoder layer (none, selective,
// full), or a mode per layer kind where a model has several (DeepSeek-V3's dense and moe layers,
// Qwen3-Next's linear_attention and full_attention ones), as `census step --recompute` and
// `census plan --layout recompute=` write it: "selective", or "none,moe=full" (the first item, where it
// names no kind, is every other layer's mode).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "models/config.h"
#include "util/result.h"

namespace census {

enum class Recompute : uint8_t { kNone, kSelective, kFull };

std::string recompute_name(Recompute recompute);

struct RecomputeChoice {
  Recompute all = Recompute::kNone;  // every layer whose kind is not named below
  std::vector<std::pair<std::string, Recompute>> by_kind;  // in the model's order of kinds, each differing from `all`

  Recompute of_kind(std::string_view kind) const;
  bool uniform() const { return by_kind.empty(); }
  bool operator==(const RecomputeChoice&) const = default;
};

// "selective", or "none,moe=full": what parse_recompute reads back.
std::string recompute_text(const RecomputeChoice& choice);

// Read `text` for `config` (its kinds, layer_kinds): refused, naming `flag`, for a mode or kind it does
// not know or a kind given twice.
Result<RecomputeChoice> parse_recompute(const ModelConfig& config, std::string_view text, const std::string& flag);

}  // namespace census
