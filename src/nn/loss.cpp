#include "nn/loss.h"

#include <limits>

#include "nn/tensor_parallel.h"
#include "ops/ops.h"

namespace census::nn {

const std::vector<std::string>& causal_lm_loss_names() {
  static const std::vector<std::string> names{"hf", "trl-chunked-nll", "liger-flce", "torchtune-chunked",
                                                "torchtune-linear"};
  return names;
}

std::string_view causal_lm_loss_name(CausalLMLoss loss) {
  return causal_lm_loss_names()[static_cast<size_t>(loss)];
}

std::optional<CausalLMLoss> causal_lm_loss_named(std::string_view name) {
  const std::vector<std::string>& names = causal_lm_loss_names();
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return static_cast<CausalLMLoss>(i);
  return std::nullopt;
}

Tensor for_causal_lm_loss(Tensor logits, const Tensor& labels, int64_t vocab_size) {
  Tensor upcast = ops::to(logits, DType::kFloat32);
  logits = Tensor();
  Tensor padded = ops::constant_pad(labels, 0, 1);
  Tensor shift_labels = ops::contiguous(ops::slice(padded, -1, 1, std::numeric_limits<int64_t>::max()));
  // Under loss_parallel the logits are the rank's vocabulary shard (V / T columns), and cross_entropy
  // runs as its DTensor handlers run it on that shard.
  const ParallelStyles* styles = parallel_styles();
  const int64_t ranks = styles ? styles->loss_parallel_ranks() : 0;
  const int64_t columns = ranks > 0 ? upcast.size(-1) : vocab_size;
  Tensor flat_logits = ops::view(upcast, Dims{upcast.numel() / columns, columns});
  Tensor flat_labels = ops::view(shift_labels, Dims{shift_labels.numel()});
  if (ranks > 0) return ops::vocab_parallel_nll_loss(ops::vocab_parallel_log_softmax(flat_logits, ranks), flat_labels, ranks);
  return ops::cross_entropy(flat_logits, flat_labels);
}

}  // namespace census::nn
