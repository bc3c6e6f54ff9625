// File: minimax_moe.h
// MiniMax-M2's sparse MoE block (transformers/models/minimax_m2/modeling_minimax_m2.py, Transformers 5):
// a sigmoid router whose choice adds the block's e_score_correction_bias, without groups, and the
// routed experts.
//
// Legend: T = tokens, H = hidden_size, E = experts, K = experts per token.
#pragma once

#include <memory>

#include "nn/moe.h"

namespace census::nn {

// MiniMaxM2TopKRouter: logits = x W^T (bf16); scores = sigmoid(logits.float()); the top K of
// scores + bias chosen; their scores gathered and renormalized in place: the fp32 weights.
//   saves: x (T, H) by the linear; the fp32 scores (T, E) by sigmoid; the indices by topk and gather;
//   a clone of the gathered weights (T, K) and their sum (T, 1) by the in-place div.
class MiniMaxM2TopKRouter {
 public:
  MiniMaxM2TopKRouter(std::string path, int64_t num_experts, int64_t top_k, int64_t hidden_size, ParameterList& params);
  Routing forward(const Tensor& hidden_states, const Tensor& e_score_correction_bias) const;

 private:
  std::string path_;
  int64_t top_k_;
  Tensor weight_;  // (E, H)
};

// MiniMaxM2SparseMoeBlock: the router on the (T, H) view of the input, given the block's bias
// buffer; the experts; the output reshaped (B, S, H).
class MiniMaxM2SparseMoeBlock final : public FeedForward {
 public:
  MiniMaxM2SparseMoeBlock(std::string path, MiniMaxM2TopKRouter gate, std::unique_ptr<MoeExperts> experts,
                          int64_t num_experts);
  Tensor forward(const Tensor& hidden_states) const override;
  std::vector<Tensor> buffers() const override { return {e_score_correction_bias_}; }

 private:
  std::string path_;
  MiniMaxM2TopKRouter gate;
  std::unique_ptr<MoeExperts> experts;
  Tensor e_score_correction_bias_;  // (E), a buffer in the default dtype (bf16)
};

}  // namespace census::nn
