// File: pre_norm_layer.h
// The residual structure of a pre-norm decoder layer, which Llama's layer and every family that copies
// it runs around its own attention and feed-forward:
//
//   h   = x + attention(input_layernorm(x))
//   out = h + mlp(post_attention_layernorm(h))
//
// Statement by statement as Transformers writes it, so that each residual and each intermediate is
// dropped when the Python local holding it is rebound. Under tensor parallelism the styles in force
// prepare self_attn's and mlp's inputs and mlp's output (nn/tensor_parallel.h), as module hooks do:
// the caller's local keeps the unprepared tensor until it is rebound.
#pragma once

#include "nn/mlp.h"
#include "nn/rms_norm.h"
#include "nn/tensor_parallel.h"
#include "ops/ops.h"

namespace census::nn {

template <class Attention>
Tensor pre_norm_layer_forward(const Tensor& input, const Norm& input_layernorm, Attention&& attention,
                              const Norm& post_attention_layernorm, const FeedForward& mlp) {
  const ParallelStyles* styles = parallel_styles();
  Tensor residual = input;
  Tensor hidden_states = input_layernorm.forward(input);
  hidden_states = styles ? attention(styles->module_input("self_attn", hidden_states)) : attention(hidden_states);
  hidden_states = ops::add(residual, hidden_states);
  residual = hidden_states;
  hidden_states = post_attention_layernorm.forward(hidden_states);
  hidden_states = styles ? styles->module_output("mlp", mlp.forward(styles->module_input("mlp", hidden_states)))
                         : mlp.forward(hidden_states);
  return ops::add(residual, hidden_states);
}

}  // namespace census::nn
