#include "nn/trl_chunked_loss.h"

#include <algorithm>
#include <vector>

#include "autograd/checkpoint.h"
#include "ops/embedding.h"
#include "ops/ops.h"

namespace census::nn {
namespace {

// _chunk(h, w, b=None, lbl, logit_scale, final_logit_softcapping): its three sums. Each step is a
// statement of its own: Python frees a temporary as soon as the op that reads it returns.
std::vector<Tensor> chunk(const std::vector<Tensor>& inputs, double logit_scale, double softcap) {
  const Tensor& h = inputs[0];
  const Tensor& w = inputs[1];
  const Tensor& lbl = inputs[2];
  Tensor logits = ops::matmul(ops::to(h, DType::kFloat32), ops::t(ops::to(w, DType::kFloat32)));
  if (logit_scale != 1.0) logits = ops::mul_number(logits, logit_scale);
  if (softcap != 0) {
    Tensor capped = ops::div_number(logits, softcap);
    capped = ops::tanh(capped);
    logits = ops::mul_number(capped, softcap);
  }
  Tensor log_p = ops::log_softmax(logits, -1);
  Tensor chunk_loss = ops::nll_loss(log_p, lbl);
  Tensor valid = ops::ne(lbl, -100);
  Tensor chunk_correct = ops::argmax(logits, -1);
  chunk_correct = ops::eq(chunk_correct, lbl);
  chunk_correct = ops::bitwise_and(chunk_correct, valid);
  chunk_correct = ops::sum(chunk_correct);
  chunk_correct = ops::to(chunk_correct, DType::kFloat32);
  Tensor chunk_entropy = ops::exp(log_p);
  chunk_entropy = ops::mul(chunk_entropy, log_p);
  chunk_entropy = ops::sum(chunk_entropy, {1}, /*keepdim=*/false);
  chunk_entropy = ops::neg(chunk_entropy);
  chunk_entropy = ops::mul(chunk_entropy, valid);
  chunk_entropy = ops::sum(chunk_entropy);
  // The frame's locals go in the order they were bound.
  logits = Tensor();
  log_p = Tensor();
  valid = Tensor();
  return {std::move(chunk_loss), std::move(chunk_correct), std::move(chunk_entropy)};
}

}  // namespace

TrlChunkedLoss trl_chunked_cross_entropy_loss(const Tensor& hidden_states, const Tensor& lm_head_weight,
                                              const Tensor& labels_in, double logit_scale,
                                              double final_logit_softcapping) {
  const int64_t width = hidden_states.size(-1);
  const int64_t seq = hidden_states.size(-2);
  const int64_t tokens = hidden_states.numel() / width / seq * (seq - 1);
  Tensor hidden = ops::reshape(ops::slice(hidden_states, -2, 0, seq - 1), Dims{tokens, width});
  Tensor labels = ops::reshape(ops::slice(labels_in, -1, 1, labels_in.size(-1)), Dims{tokens});
  Tensor valid = ops::ne(labels, -100);
  TrlChunkedLoss out;
  out.num_valid_tokens = ops::sum(valid);
  out.num_correct_tokens = ops::new_zeros(hidden, Dims{}, DType::kFloat32);
  out.entropy_sum = ops::new_zeros(hidden, Dims{}, DType::kFloat32);
  ops::item(ops::eq(out.num_valid_tokens, 0));  // if n_valid_tensor == 0: no, every label is a token
  Tensor order = ops::to(valid, DType::kInt8);
  order = ops::argsort_stable(order);
  hidden = ops::index(hidden, order);
  labels = ops::index(labels, order);
  Tensor n_padded = ops::div_number(out.num_valid_tokens, static_cast<double>(kTrlChunkSize));
  n_padded = ops::ceil(n_padded);
  n_padded = ops::to(n_padded, DType::kInt64);
  n_padded = ops::mul_number(n_padded, static_cast<double>(kTrlChunkSize));
  Tensor loss = ops::new_zeros(hidden, Dims{}, DType::kFloat32);
  ops::item(n_padded);  // range(0, n_padded, chunk_size)
  const RegionForward region = [logit_scale, final_logit_softcapping](const std::vector<Tensor>& inputs) {
    return chunk(inputs, logit_scale, final_logit_softcapping);
  };
  // The loop's variables hold a chunk's sums until the next chunk's replace them, and the last until
  // the function returns.
  std::vector<Tensor> sums;
  for (int64_t start = 0; start < tokens; start += kTrlChunkSize) {
    const int64_t end = std::min(start + kTrlChunkSize, tokens);
    sums = checkpoint_full(region, {ops::slice(hidden, 0, start, end), lm_head_weight, ops::slice(labels, 0, start, end)});
    loss = ops::add(loss, sums[0]);
    out.num_correct_tokens = ops::add(out.num_correct_tokens, sums[1]);
    out.entropy_sum = ops::add(out.entropy_sum, sums[2]);
  }
  out.loss = ops::div(loss, out.num_valid_tokens);
  return out;
}

}  // namespace census::nn
