// File: recompute_choice.h
// Activation checkpointing as a run chooses it: one mode for every decoder layer, or a mode per layer
// kind where a model has several (DeepSeek-V3's dense and moe layers, Qwen3-Next's linear_attention and
// full_attention ones), as `census step --recompute` and `census plan --layout recompute=` write it:
// "selective", or "none,moe=full" (the first item, where it names no kind, is every other layer's mode).
// The modes (autograd/checkpoint.h):
//   none              no checkpointing
//   selective         HyperParallel's selective policy
//   full              non-reentrant checkpointing of each layer (the HF Trainer's default)
//   full-reentrant    checkpoint(use_reentrant=True)
//   torchtitan-op     torchtitan's per-op selective policy at commit 9dec370 (December 2024)
// and, for every layer alone, torchtitan-layer:N: torchtitan's per-layer policy at that commit
// (selective_ac_option = "N"): counting the stage's decoder layers from 1, each whose count N divides is
// checkpointed whole (non-reentrant), the others not; N = 1 is every layer.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "autograd/checkpoint.h"
#include "models/config.h"
#include "util/result.h"

namespace census {


std::string recompute_name(Recompute recompute);

struct RecomputeChoice {
  Recompute all = Recompute::kNone;  // every layer whose kind is not named below
  std::vector<std::pair<std::string, Recompute>> by_kind;  // in the model's order of kinds, each differing from `all`
  // torchtitan-layer:N (all none, no kinds named): every N-th layer of a stage checkpointed whole; 0: off.
  int64_t every_nth_layer = 0;

  Recompute of_kind(std::string_view kind) const;
  // The mode of the stage's `count`-th decoder layer (from 1) of kind `kind`.
  Recompute of_layer(int64_t count, std::string_view kind) const {
    if (every_nth_layer > 0) return count % every_nth_layer == 0 ? Recompute::kFull : Recompute::kNone;
    return of_kind(kind);
  }
  bool uniform() const { return by_kind.empty() && every_nth_layer == 0; }
  bool operator==(const RecomputeChoice&) const = default;
};

// The most layers a torchtitan-layer:N policy counts between checkpoints: a config's layer bound.
inline constexpr int64_t kLargestLayerPeriod = int64_t{1} << 20;

// "selective", or "none,moe=full": what parse_recompute reads back.
std::string recompute_text(const RecomputeChoice& choice);

// Read `text` for `config` (its kinds, layer_kinds): refused, naming `flag`, for a mode or kind it does
// not know or a kind given twice.
Result<RecomputeChoice> parse_recompute(const ModelConfig& config, std::string_view text, const std::string& flag);

}  // namespace census
