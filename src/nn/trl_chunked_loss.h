// File: trl_chunked_loss.h
// TRL's SFT default loss (SFTConfig.loss_type left unset: "chunked_nll"), as trl/trainer/sft_trainer.py
// writes it at huggingface/trl f2cd577. _patch_chunked_ce_lm_head replaces the model's forward: the
// backbone runs, the logits are never made, and _chunked_cross_entropy_loss takes the last hidden state
// (B, S, H), the head's weight (V, H) and the labels (B, S):
//
//   hidden = hidden_states[..., :-1, :].reshape(-1, H)   (T, H), T = B (S - 1): a view where B = 1, else a copy
//   labels = labels[..., 1:].reshape(-1)                 (T) int64
//   valid = labels != -100; n_valid = valid.sum()        (T) bool; an int64 scalar
//   correct, entropy_sum = two fp32 scalars
//   if n_valid == 0: ...                                 a scalar read; every label here is a token
//   order = valid.to(int8).argsort(descending, stable)   (T) int8, then sort's int8 values and int64 indices
//   hidden = hidden[order]; labels = labels[order]       gathers; IndexBackward0 keeps order
//   n_padded = (n_valid / 256).ceil().to(int64) * 256
//   loss = an fp32 scalar
//   for start in range(0, n_padded, 256):                a scalar read; ceil(T / 256) chunks of 256 tokens
//     checkpoint(_chunk, hidden[start:start+256], weight, None, labels[start:start+256], ...,
//                use_reentrant=False)                    every save recomputed in the backward
//     loss, correct, entropy_sum += the chunk's three
//   loss / n_valid                                       DivBackward0 keeps n_valid
//
// _chunk, per chunk of n tokens:
//   logits = h.float() @ w.float().t()                   (n, H) fp32 and a whole (V, H) fp32 copy of the head
//   logits * logit_scale (where not 1); cap * tanh(logits / cap) (where the config caps them)
//   log_p = log_softmax(logits); nll_loss(log_p, lbl, reduction="sum")
//   valid = lbl != -100; ((logits.argmax(-1) == lbl) & valid).sum().float()   the accuracy, untracked
//   (-(log_p.exp() * log_p).sum(-1) * valid).sum()       the entropy, tracked (its graph goes unused)
// The backward's recompute makes the fp32 copy of the head again and keeps it for mm's backward, which
// adds an fp32 (V, H) gradient of it, cast to the weight's dtype and accumulated, chunk by chunk.
#pragma once

#include <cstdint>

#include "tensor/tensor.h"

namespace census::nn {

inline constexpr int64_t kTrlChunkSize = 256;  // _CHUNKED_LM_HEAD_CHUNK_SIZE

struct TrlChunkedLoss {
  Tensor loss;
  // What the patched forward's output holds beside the loss (_ChunkedCELMHeadOutput), dropped with it.
  Tensor num_correct_tokens, entropy_sum, num_valid_tokens;
};

// `logit_scale`: the config's logit_scale (1: none); `final_logit_softcapping`: 0 where not capped.
TrlChunkedLoss trl_chunked_cross_entropy_loss(const Tensor& hidden_states, const Tensor& lm_head_weight,
                                              const Tensor& labels, double logit_scale,
                                              double final_logit_softcapping);

}  // namespace census::nn
