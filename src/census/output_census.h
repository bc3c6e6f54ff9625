// File: output_census.h
// The output layer's census: the final norm, the LM head and the causal-LM loss (fp32 logits), as the
// trainer runs them, the model's logits dropped before the backward. Its TP split is the vocabulary's:
// the layer is censused at the vocabulary and at half of it, as a vocabulary-parallel loss over two
// ranks holds it.
#pragma once

#include <cstdint>

#include "census/activations.h"
#include "models/config.h"

namespace census {

struct OutputCensus {
  int64_t saved_bytes = 0;    // the final norm's input not included, as a layer's
  int64_t working_bytes = 0;  // the loss left out; the head's and norm's gradients count only to find the peak
  int64_t kept_bytes = 0;     // live once the forward returned, the loss left out
};

OutputCensus census_output(const ModelConfig& config, int64_t seq_length, int64_t vocab_size);

// The output layer's record per token: at the vocabulary and at half of it.
KindActivations census_output_activations(const ModelConfig& config, int64_t seq_length);

}  // namespace census
