// File: layer_census.h
// The census of one decoder layer: run its forward at micro-batch 1 on a sequence of S tokens, then its
// backward, and count.
//
//   saved_bytes    storages autograd saves (parameters excluded), each once, still live when the
//                  forward has returned: the layer's activations for its backward
//   working_bytes  activations live when the backward holds the most (Note [Backward peak])
//   saved_by_op    saved_bytes split by the op of the cost model's op vector whose backward takes it
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "census/saved_tensors.h"
#include "models/config.h"

namespace census {

struct SavedRow {  // one saved storage, for `census explain`
  int64_t bytes;
  std::string dtype;
  Dims shape;
  std::string module;
  std::string by_op;
  std::string op_class;
};

struct LayerCensus {
  int64_t saved_bytes = 0;
  int64_t working_bytes = 0;
  // Live once the forward returned, its output left out: what is saved plus the layer's input.
  int64_t kept_bytes = 0;
  std::array<int64_t, kSavedOpCount> saved_by_op{};
  std::vector<SavedRow> saved;  // largest first (explain)
};

// Note [Backward peak] The reference census's rule: from the end of the forward, follow every
// storage's birth and death through the backward, leaving the layer's output out; the parameters'
// gradients count toward finding the moment the most bytes are live but not toward the bytes
// reported. The layer's input, its gradient, the output's gradient and everything saved count.
// With `selective`, also read the selective census's kept bytes off the same forward, where it can
// (Note [Selective kept bytes from the plain forward], census/selective_reading.h).
struct SelectiveReading;
LayerCensus census_layer(const ModelConfig& config, int64_t layer_index, int64_t seq_length, bool explain = false,
                         SelectiveReading* selective = nullptr);

}  // namespace census
