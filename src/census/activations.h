// File: activations.h
// KindActivations: what a layer of each kind keeps and holds, per token, split into the part tensor
// parallelism divides and the part it does not. Each kind's first layer is censused as one rank of
// TP 1 and of TP 2 holds it; with x1 and x2 the two bytes,
//   x    = max(0, 2*x2 - x1) / S     the part TP does not split
//   x_tp = max(0, 2*(x1 - x2)) / S   the part it does (at TP t a rank holds x + x_tp / t per token)
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "census/layer_census.h"
#include "models/config.h"

namespace census {

struct KindActivations {
  double saved = 0;
  double saved_tp = 0;
  double working = 0;
  double working_tp = 0;
  int64_t seq_length = 0;
  // Under HyperParallel's selective checkpointing: what the layer keeps, and the shares of its
  // attention projections' and the rest's matmul FLOPs the backward runs again.
  std::optional<double> selective;
  std::optional<double> selective_tp;
  std::optional<double> selective_attention_mm;
  std::optional<double> selective_ffn_mm;
  std::map<std::string, double> ops;     // by the ops the TP-1 layer saves for
  std::map<std::string, double> ops_tp;
};

// The record of a pair of censuses (TP 1 and TP 2, or the vocabulary and half of it), per token: per
// each of the micro-batch's seq_length x micro_batch_size tokens.
KindActivations split_record(int64_t saved_1, int64_t saved_2, int64_t working_1, int64_t working_2,
                             int64_t seq_length, int64_t micro_batch_size = 1);
// The same with the bytes by op of the TP-1 layer's saves.
KindActivations kind_activations(const LayerCensus& tp1, const LayerCensus& tp2, int64_t seq_length,
                                 int64_t micro_batch_size = 1);

// Every layer kind of `stack` (the model's own where empty), in stack order, each censused on its
// first layer, plain and selective. A kind whose first layer cannot run alone (it reads an earlier
// layer's output: Family::stack_only) takes its record from the stack census instead: the mean of its
// layers as the model runs them, with no selective part and no bytes by op.
std::vector<std::pair<std::string, KindActivations>> census_activations(const ModelConfig& config,
                                                                         int64_t seq_length,
                                                                         const std::vector<LayerGroup>& stack = {});

}  // namespace census
