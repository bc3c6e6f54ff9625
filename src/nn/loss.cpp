#include "nn/loss.h"

#include <limits>

#include "ops/ops.h"

namespace census::nn {

Tensor for_causal_lm_loss(Tensor logits, const Tensor& labels, int64_t vocab_size) {
  Tensor upcast = ops::to(logits, DType::kFloat32);
  logits = Tensor();
  Tensor padded = ops::constant_pad(labels, 0, 1);
  Tensor shift_labels = ops::contiguous(ops::slice(padded, -1, 1, std::numeric_limits<int64_t>::max()));
  Tensor flat_logits = ops::view(upcast, Dims{upcast.numel() / vocab_size, vocab_size});
  Tensor flat_labels = ops::view(shift_labels, Dims{shift_labels.numel()});
  return ops::cross_entropy(flat_logits, flat_labels);
}

}  // namespace census::nn
