#include "nn/causal_conv1d.h"

#include "ops/ops.h"

namespace census::nn {

Tensor causal_conv1d_fn(const Tensor& hidden_states, const Tensor& weight, HiddenAct activation, const Tensor& bias) {
  const int64_t seq_len = hidden_states.size(2);
  const int64_t padding = weight.size(-1) - 1;
  Tensor input = ops::to(hidden_states, weight.dtype());  // bf16 already: no copy
  Tensor out = ops::conv1d_depthwise(input, ops::unsqueeze(weight, 1), padding, bias);
  // [:, :, :seq_len] is no op at all when it covers the whole length (kernel size 1).
  if (out.size(2) != seq_len) out = ops::slice(out, 2, 0, seq_len);
  // ACT2FN[activation], called as a function: no module of its own.
  out = activation == HiddenAct::kSilu ? ops::silu(out) : ops::gelu_tanh(out);
  return ops::to(out, hidden_states.dtype());
}

}  // namespace census::nn
