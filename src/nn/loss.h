// File: loss.h
// Transformers' causal-LM loss (transformers/loss/loss_utils.py ForCausalLMLoss), as the trainer runs
// it on the output layer's logits:
//
//   logits.float()                         (1, S, V) fp32; the bf16 logits die here
//   labels padded by one ignore_index      (1, S+1) int64; labels[..., 1:] is a view, already contiguous
//   cross_entropy(logits.view(-1, V), shift_labels.view(-1)), mean reduction
//     log_softmax saves its (S, V) fp32 result; nll_loss saves it again, the target and total_weight
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/tensor.h"

namespace census::nn {

// The loss a trainer computes from the model's last hidden state, as `census step --loss` names it:
//   hf                Transformers' ForCausalLMLoss on the whole logits (the model's own forward)
//   trl-chunked-nll   TRL's SFT default: no logits, the loss in checkpointed chunks of 256 tokens
//                     (nn/trl_chunked_loss.h)
//   liger-flce        Liger's fused linear cross-entropy: no logits, both gradients made in the forward
//                     (nn/liger_fused_linear_cross_entropy.h)
//   torchtune-chunked torchtune's CEWithChunkedOutputLoss: the logits in 8 chunks, each upcast on its own
//   torchtune-linear  torchtune's LinearCrossEntropyLoss: the head run in the loss, on the tokens alone
//                     (both nn/torchtune_loss.h)
enum class CausalLMLoss : uint8_t { kForCausalLM, kTrlChunkedNll, kLigerFlce, kTorchtuneChunked, kTorchtuneLinear };
const std::vector<std::string>& causal_lm_loss_names();  // in the order the help lists them
std::string_view causal_lm_loss_name(CausalLMLoss loss);
std::optional<CausalLMLoss> causal_lm_loss_named(std::string_view name);

// `logits` is taken by value and dropped once cast, as the loss function holds the only reference.
Tensor for_causal_lm_loss(Tensor logits, const Tensor& labels, int64_t vocab_size);

}  // namespace census::nn
