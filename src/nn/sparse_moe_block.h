// File: sparse_moe_block.h
// The sparse MoE block of the Qwen-MoE line and Mixtral (transformers/models/{qwen2_moe,qwen3_moe,
// mixtral,qwen3_next}/modeling_*.py, Transformers 5), as one module any family can build:
//
//   Qwen3MoeSparseMoeBlock  router (weights cast back to bf16) -> experts
//   MixtralSparseMoeBlock   router (fp32 weights, always renormalized) -> experts
//   Qwen2MoeSparseMoeBlock  shared expert, router, experts, sigmoid(shared_expert_gate(x)) * shared, sum
//                           (Qwen3NextSparseMoeBlock and Qwen3_5MoeSparseMoeBlock are its copies)
//
// Legend: T = tokens, H = hidden_size, E = experts, K = experts per token, Is = shared expert width.
#pragma once

#include <memory>
#include <optional>

#include "nn/moe.h"

namespace census::nn {

struct SharedExpert {
  int64_t intermediate_size = 0;  // 0: the block has no shared expert
  HiddenAct act = HiddenAct::kSilu;
};

class SparseMoeBlock final : public FeedForward {
 public:
  // `experts` are Transformers' or a fused replacement; the caller registers the router and the
  // experts in its block's order (Qwen2-MoE, Mixtral: the gate, then the experts; Qwen3-MoE,
  // Qwen3-VL-MoE: the experts, then the gate), then the block its shared_expert and shared_expert_gate.
  SparseMoeBlock(std::string path, TopKRouter gate, std::unique_ptr<MoeExperts> experts, SharedExpert shared,
                 int64_t hidden_size, ParameterList& params);
  Tensor forward(const Tensor& hidden_states) const override;

 private:
  std::string path_;
  TopKRouter gate;
  std::unique_ptr<MoeExperts> experts;
  std::optional<GatedMLP> shared_expert;     // H -> Is -> H
  std::optional<Linear> shared_expert_gate;  // H -> 1
};

}  // namespace census::nn
