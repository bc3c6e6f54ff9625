// File: stack_census.h
// The census of a whole decoder: the model's forward as its family writes it (models/causal_lm.h: the
// embedding, what the model computes once, every decoder layer in model order, the
// multi-token-prediction layers left out as Transformers builds none, and its final norm) on one
// sequence of S tokens, then the backward from the last hidden state (out.sum().backward()). It prices layers that cannot run alone, since each layer is called as the
// model calls it, with what earlier layers wrote.
//
//   kept   the bytes of the storages autograd saves first while layer i's forward runs (its own
//          saves, and what the model made before and hands it, such as the rotary cos and sin the
//          first layer saves), still live once the whole forward has returned
//   held   kept, plus the most the heap holds beyond every layer's saves, the parameters and their
//          gradients, while layer i's backward runs (Note [Stack windows])
//
// The embedding's and the final norm's saves count toward no layer: the output census prices the end
// of the model.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "census/activations.h"
#include "models/config.h"
#include "util/result.h"

namespace census {

struct StackLayerCensus {
  int64_t kept = 0;
  int64_t held = 0;
};

// The most layers a whole-model census runs (the stack census, the step, a kind priced through the
// stack): 2^10, eight times the deepest model trained (Llama 3.1 405B's 126). It runs every layer, so
// its time and memory grow with them; a config may state more, and census layer prices one of them.
inline constexpr int64_t kLargestStackLayers = int64_t{1} << 10;
Status check_stack_depth(const ModelConfig& config);

// Each decoder layer's (kept, held), in model order.
std::vector<StackLayerCensus> census_stack(const ModelConfig& config, int64_t seq_length);

// Each layer kind's record from the stack at TP 1 and TP 2: the mean of its layers' kept and held
// bytes, split as census_activations splits a layer's (saved from kept, working from held); no
// selective part and no bytes by op. Kinds in stack order.
std::vector<std::pair<std::string, KindActivations>> stack_activations(const ModelConfig& config,
                                                                       int64_t seq_length);

}  // namespace census
