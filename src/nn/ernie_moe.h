// File: ernie_moe.h
// ERNIE-4.5's sparse MoE block (transformers/models/ernie4_5_moe/modeling_ernie4_5_moe.py,
// Transformers 5): shared experts on the input first, then a softmax router held in fp32 whose
// choice adds a correction bias, the routed experts, and the sum.
//
// Legend: T = tokens, H = hidden_size, E = experts, K = experts per token, I = an expert's width.
#pragma once

#include <memory>
#include <optional>

#include "nn/mlp.h"
#include "nn/moe.h"

namespace census::nn {

// Ernie4_5_MoeTopKRouter, with autocast off: its weight is an fp32 parameter (E, H); logits =
// x.float() W^T; probs = softmax(logits) (fp32); the top K of moe_statics(probs) (probs plus the
// fp32 e_score_correction_bias, a parameter without gradient) chosen; their probs gathered and
// divided by clamp(sum, min=moe_norm_min); cast to the input's dtype.
//   saves: the fp32 copy of x (T, H) by the linear; probs (T, E) by softmax; the indices by topk and
//   gather; the sum (T, 1) by clamp; the gathered probs (T, K) and the clamped sum by the div.
class Ernie4_5_MoeTopKRouter {
 public:
  Ernie4_5_MoeTopKRouter(std::string path, int64_t num_experts, int64_t top_k, int64_t hidden_size, double norm_min,
                         ParameterList& params);
  Routing forward(const Tensor& hidden_states) const;

 private:
  std::string path_;
  std::string statics_path_;  // "<path>.moe_statics"
  int64_t top_k_;
  double norm_min_;
  Tensor weight_;                   // (E, H) fp32
  Tensor e_score_correction_bias_;  // (1, E) fp32, requires_grad=False
};

// Ernie4_5_MoeSparseMoeBlock: on the (T, H) view of the input, the shared experts (one GatedMLP of
// moe_num_shared_experts * I, biased as use_bias says) where there are any, the router, the experts;
// the shared output added; reshaped (B, S, H).
class Ernie4_5_MoeSparseMoeBlock final : public FeedForward {
 public:
  // `gate` and `experts` are built by the caller in the order the block registers them (gate,
  // experts); the shared experts, registered last, are `shared_intermediate_size` wide (0: none).
  Ernie4_5_MoeSparseMoeBlock(std::string path, Ernie4_5_MoeTopKRouter gate, std::unique_ptr<MoeExperts> experts,
                             int64_t hidden_size, int64_t shared_intermediate_size, bool bias, HiddenAct act,
                             ParameterList& params);
  Tensor forward(const Tensor& hidden_states) const override;

 private:
  std::string path_;
  Ernie4_5_MoeTopKRouter gate;
  std::unique_ptr<MoeExperts> experts;
  std::optional<GatedMLP> shared_experts;
};

}  // namespace census::nn
