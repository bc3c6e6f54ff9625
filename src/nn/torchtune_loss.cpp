#include "nn/torchtune_loss.h"

#include <utility>

#include "autograd/offload_activations.h"
#include "ops/embedding.h"
#include "ops/ops.h"

namespace census::nn {
namespace {

constexpr double kTorchtuneIgnoreIndex = -100;  // CROSS_ENTROPY_IGNORE_IDX

// compute_cross_entropy's F.cross_entropy(logits.float(), labels, reduction="sum"): the fp32 copy is
// log_softmax's argument alone, and goes once it has run.
Tensor summed_cross_entropy(const Tensor& logits, const Tensor& labels) {
  return ops::cross_entropy(ops::to(logits, DType::kFloat32), labels);
}

// torchtune's labels mark the last position of each row ignore_index: B (S - 1) of them are tokens.
int64_t token_labels(const Tensor& labels) { return labels.numel() / labels.size(-1) * (labels.size(-1) - 1); }

}  // namespace

Tensor torchtune_chunked_output_loss(Tensor hidden_states, const OutputProjection& output, const Tensor& labels,
                                     const ModelReturns& model_returns) {
  std::vector<Tensor> outputs;
  for (const Tensor& chunk : ops::tensor_split(hidden_states, kTorchtuneOutputChunks, 1))
    outputs.push_back(output(chunk));
  hidden_states = Tensor();
  OffloadActivations::model_output_made();  // chunked_output returns the list: the model's forward ends
  if (model_returns) model_returns(outputs);
  const Tensor total_elements = ops::sum(ops::ne(labels, kTorchtuneIgnoreIndex));
  std::vector<Tensor> label_chunks;
  for (const Tensor& chunk : ops::tensor_split(labels, kTorchtuneOutputChunks, 1))
    label_chunks.push_back(ops::reshape(chunk, Dims{chunk.numel()}));
  std::vector<Tensor> logit_chunks;
  for (const Tensor& chunk : outputs) logit_chunks.push_back(ops::reshape(chunk, Dims{chunk.numel() / chunk.size(-1), chunk.size(-1)}));
  Tensor total_loss;  // the Python float 0.0: the first chunk's loss is added to it out of place
  for (size_t k = 0; k < logit_chunks.size(); ++k) {
    Tensor chunk_loss = summed_cross_entropy(logit_chunks[k], label_chunks[k]);
    if (total_loss.defined()) {
      ops::add_(total_loss, chunk_loss);
    } else {
      total_loss = ops::add(chunk_loss, 0.0);
    }
  }
  return ops::div(total_loss, total_elements);
}

Tensor torchtune_linear_cross_entropy_loss(const Tensor& hidden_states, const OutputProjection& linear_projection,
                                           const Tensor& labels) {
  const int64_t tokens = token_labels(labels);
  ops::nonzero(ops::ne(labels, kTorchtuneIgnoreIndex), tokens);  // total_valid_tokens: only its numel is read
  const Tensor targets = ops::reshape(labels, Dims{labels.numel()});
  const Tensor outputs = ops::reshape(hidden_states, Dims{hidden_states.numel() / hidden_states.size(-1), hidden_states.size(-1)});
  Tensor hidden, target;
  {  // mask_inputs
    const Tensor indices = ops::unbind(ops::nonzero(ops::ne(targets, kTorchtuneIgnoreIndex), tokens), 1)[0];
    hidden = ops::index_select(outputs, indices);
    target = ops::index_select(targets, indices);
  }
  const std::vector<Tensor> hidden_chunks = ops::tensor_split(hidden, kTorchtuneOutputChunks, 0);
  const std::vector<Tensor> target_chunks = ops::tensor_split(target, kTorchtuneOutputChunks, 0);
  Tensor total_loss = ops::scalar_tensor_fresh();  // torch.tensor(0.0, device=...)
  Tensor loss;  // the loop's variable: a chunk's loss lives until the next chunk's replaces it
  for (size_t k = 0; k < hidden_chunks.size(); ++k) {
    loss = summed_cross_entropy(linear_projection(hidden_chunks[k]), target_chunks[k]);
    ops::add_(total_loss, loss);
  }
  return ops::div_number(total_loss, static_cast<double>(tokens));
}

}  // namespace census::nn
