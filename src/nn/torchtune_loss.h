// File: torchtune_loss.h
// torchtune's two SFT losses (torchtune/modules/loss at pytorch/torchtune bd2a0fc), on a Transformers
// model as torchtune's recipe drives its own decoder (recipes/full_finetune_single_device.py, _loss_step):
// the model's output goes to the loss, then `del outputs`. The labels are torchtune's, already shifted by
// its dataset (datasets/_sft.py: the last label of each row is ignore_index), so the loss shifts nothing
// and B (S - 1) of the B S labels are tokens. Neither loss runs the family's own transform of its logits:
// the head is the Linear torchtune hands the loss (model.output).
//
// CEWithChunkedOutputLoss(num_output_chunks=8), whose model ends in TransformerDecoder.chunked_output:
//   outputs = [output(chunk) for chunk in h.tensor_split(8, dim=1)]   eight (B, S/8, V) logits, all alive
//                                                  through the loss; h goes as the forward returns
//   total_elements = (labels != -100).sum()        an int64 scalar
//   labels = [t.reshape(-1) for t in labels.tensor_split(8, dim=1)]   views where B = 1, else copies
//   logits = [l.reshape(-1, V) for l in logits]    views
//   total_loss = 0.0; per chunk:
//     total_loss += F.cross_entropy(logits.float(), labels, reduction="sum")
//                                                  the chunk's fp32 copy goes once log_softmax has run, which
//                                                  saves its (n, V) fp32 result: every chunk's is kept
//   total_loss / total_elements
//
// LinearCrossEntropyLoss(num_output_chunks=8, mask_ignored_tokens=True), with the model's head skipped:
//   total_valid_tokens = torch.where(targets != -100)[0].numel()    a (n, 2) int64 nonzero, made and freed
//   targets = targets.reshape(-1); outputs = outputs.reshape(-1, H)  views
//   indices = torch.where(targets != -100)[0]      a (n, 1) int64 nonzero, unbound: the index
//   hidden = outputs.index_select(0, indices)      (n, H), which IndexSelectBackward0 keeps the index for
//   target = targets.index_select(0, indices)      (n) int64
//   total_loss = torch.tensor(0.0); per chunk of hidden.tensor_split(8) and target.tensor_split(8):
//     logits = linear_projection(hidden_chunk)     (n/8, V) in the weight's dtype, gone once the loss is made
//     total_loss += F.cross_entropy(logits.float(), target_chunk, reduction="sum")
//   total_loss / total_valid_tokens
// In eager mode each chunk's log_softmax still saves its (n/8, V) fp32 result; torchtune compiles
// compute_cross_entropy, which Census does not model.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "tensor/tensor.h"

namespace census::nn {

inline constexpr int64_t kTorchtuneOutputChunks = 8;  // num_output_chunks, both losses' default

// The head as torchtune's model applies it (its `output` Linear): (..., H) -> (..., V).
using OutputProjection = std::function<Tensor(const Tensor&)>;

// TransformerDecoder.chunked_output then CEWithChunkedOutputLoss: `hidden_states` (B, S, H), normed, is
// taken by value and dropped once the chunks' logits are made; the logits live until the loss is made.
// `model_returns`, where given, sees the chunks as the model's forward returns them, before the loss.
using ModelReturns = std::function<void(std::vector<Tensor>&)>;
Tensor torchtune_chunked_output_loss(Tensor hidden_states, const OutputProjection& output, const Tensor& labels,
                                     const ModelReturns& model_returns = nullptr);

// LinearCrossEntropyLoss on the normed hidden states (B, S, H), which the caller holds through it.
Tensor torchtune_linear_cross_entropy_loss(const Tensor& hidden_states, const OutputProjection& linear_projection,
                                           const Tensor& labels);

}  // namespace census::nn
