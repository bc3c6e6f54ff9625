// File: liger_fused_linear_cross_entropy.h
// Liger's fused linear cross-entropy (linkedin/Liger-Kernel ead96b6), as its model patch runs it in
// training (lce_forward with skip_logits): no logits; LigerForCausalLMLoss pads the labels by one
// ignore_index, shifts them (labels[..., 1:].contiguous(), a copy where B > 1), views the hidden states
// as (B S, H), and LigerFusedLinearCrossEntropyFunction computes the loss and both gradients in the
// forward (ops/fused_linear_cross_entropy.py), under no_grad:
//
//   grad_input = zeros_like(_input)               (BT, H), kept to the backward
//   grad_weight = zeros_like(weight)              (V, H), kept to the backward, where the head trains
//   loss_1d = zeros(BT) fp32; target_mask = target != -100; target_mask.sum().item()
//   chunk_size = next_power_of_2(cdiv(BT, cdiv(V, H))), in chunks of it:
//     logits_chunk = _input_chunk @ weight.t()    (n, V) in the input's dtype; the previous chunk's lives
//                                                 until grad_logits_chunk is rebound to this one
//     liger_cross_entropy_kernel                  Triton: the loss slice and the logits' gradient written
//                                                 in place
//     grad_input[start:end] = grad_logits_chunk @ weight            an (n, H) temporary, copied
//     grad_weight += mm(grad_logits_chunk.t(), _input_chunk).float()  a (V, H) product and its fp32 copy
//   loss = sum(loss_1d)
//   save_for_backward(grad_input, grad_weight)
// The backward compares the loss's gradient with torch.tensor(1.0) (a 0-d fp32 made and freed), scales
// both in place where it is not 1 (Triton's element_mul_kernel) and returns them: the head's gradient is
// the very tensor the forward made.
#pragma once

#include "tensor/tensor.h"

namespace census::nn {

// LigerForCausalLMLoss(hidden_states (B, S, H), lm_head_weight (V, H), labels (B, S)): the loss, a 0-d fp32.
Tensor liger_for_causal_lm_loss(const Tensor& hidden_states, const Tensor& lm_head_weight, const Tensor& labels);

}  // namespace census::nn
