// File: timeline.h
// The memory timeline of one layer's census: the activation bytes live over the ops its forward and
// then its backward dispatch, stacked by what holds them, as PyTorch's memory_viz draws a real run.
//
// Bands (Note [Timeline bands]):
//   the nine saved-op classes   storages autograd saved, from their birth to their death, by the op
//                               of the cost model's op vector whose backward takes them
//   forward                     storages the forward made and autograd did not save (temporaries)
//   backward                    storages the backward made: its temporaries and the activations'
//                               gradients (the output's gradient, which the backward starts from, too)
//   parameter grads             gradients handed to the parameters, as a band apart: the census
//                               counts them to find the backward's peak, not in the bytes it reports
// The layer's output is left out, as the census leaves it out (it is the next layer's input).
//
// One column per op dispatched; a column holds the moment its op's outputs are born and the frees
// up to the next op, and keeps its highest moment (every band at that moment). Columns aggregate
// into pixel-wide buckets the same way, so no peak is hidden however many ops a layer runs.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "census/saved_tensors.h"
#include "models/config.h"

namespace census {

// Note [Timeline bands] The nine saved-op classes first (in SavedOp's order), then the rest.
inline constexpr size_t kForwardBand = kSavedOpCount;
inline constexpr size_t kBackwardBand = kSavedOpCount + 1;
inline constexpr size_t kParameterGradBand = kSavedOpCount + 2;
inline constexpr size_t kBandCount = kSavedOpCount + 3;
std::string_view band_name(size_t band);

struct Bands {
  std::array<int64_t, kBandCount> bytes{};
  int64_t total() const;
  int64_t saved() const;  // the saved-op classes' bands
  int64_t activations() const { return total() - bytes[kParameterGradBand]; }
};

struct TimelineColumn {
  int64_t first_op = 0;  // ops [first_op, last_op] (one op before bucketing)
  int64_t last_op = 0;
  Bands at_max;          // every band at the column's highest moment (all bands counted)
};

struct LiveStorage {  // a storage live at the backward's peak
  std::string module;  // innermost module when it was born: "" for the layer itself, "(backward)" for
                       // the engine's own, "... (recomputed)" for the backward's re-run of the forward
  std::string aten_op;  // the op that made it ("input" for the layer's input)
  Dims shape;
  std::string dtype;
  int64_t bytes = 0;
  std::string band;
};

struct Timeline {
  int64_t forward_ops = 0;   // columns [0, forward_ops) are the forward's
  int64_t backward_ops = 0;  // then the backward's
  std::vector<TimelineColumn> columns;  // one per op
  bool selective = false;
  Bands forward_end;         // as the forward returned (the output left out)
  int64_t saved_bytes = 0;   // the saved bands at the forward's end: census_layer's saved_bytes
  // Every band then, the positions a checkpointed layer shares with the others left out (they are
  // in the forward band, and count toward working as the census counts them): census_layer's, or
  // census_selective's, kept_bytes.
  int64_t kept_bytes = 0;
  int64_t working_bytes = 0;  // the backward's peak, parameters' gradients left out: its working_bytes
  int64_t peak_op = 0;       // the column of the backward's peak
  Bands at_peak;             // every band then
  std::vector<LiveStorage> live_at_peak;  // largest first
  // Saved bytes live at the forward's end by the innermost module that first saved them.
  std::vector<std::pair<std::string, int64_t>> saved_by_module;  // in the order first saved
};

// The timeline of census_layer(config, layer_index, seq_length): the same layer, input and backward.
// With `selective`, of census_selective's: the layer under HyperParallel's selective checkpointing,
// its forward keeping its input (saved, as `other`) and the policy's outputs (the forward band), its
// backward re-running the forward: the re-run's tensors, which the checkpoint's holders keep for the
// backward's nodes without a pack hook seeing them, are the backward band.
Timeline census_timeline(const ModelConfig& config, int64_t layer_index, int64_t seq_length, bool selective = false);

// `columns` aggregated into at most `width` buckets of consecutive columns, each keeping the column
// of its highest moment (the first, on a tie), its op range the bucket's.
std::vector<TimelineColumn> bucket_columns(const std::vector<TimelineColumn>& columns, size_t width);

}  // namespace census
