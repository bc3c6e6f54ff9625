// File: moe_blocks.h
// The sparse MoE blocks of the Llama-like MoE families, and each layer's choice between one of them
// and a dense MLP (transformers/models/{qwen2_moe,qwen3_moe,mixtral}/modeling_*.py, Transformers 5):
//
//   Qwen3MoeSparseMoeBlock  router (bf16 weights) -> experts
//   Qwen2MoeSparseMoeBlock  shared expert, router, experts, sigmoid(shared_expert_gate(x)) * shared, sum
//   MixtralSparseMoeBlock   router (fp32 weights, always renormalized) -> experts
//
// Legend: T = tokens, H = hidden_size, E = experts, K = experts per token.
#pragma once

#include <memory>

#include "models/config.h"
#include "nn/moe.h"

namespace census {

class Qwen3MoeSparseMoeBlock final : public nn::FeedForward {
 public:
  Qwen3MoeSparseMoeBlock(const ModelConfig& config, int64_t index, nn::ParameterList& params);
  Tensor forward(const Tensor& hidden_states) const override;

 private:
  std::string path_ = "mlp";
  std::unique_ptr<nn::MoeExperts> experts;  // Transformers' experts, or the fused GroupedExperts
  nn::TopKRouter gate;
};

class Qwen2MoeSparseMoeBlock final : public nn::FeedForward {
 public:
  Qwen2MoeSparseMoeBlock(const ModelConfig& config, int64_t index, nn::ParameterList& params);
  Tensor forward(const Tensor& hidden_states) const override;

 private:
  std::string path_ = "mlp";
  nn::TopKRouter gate;
  std::unique_ptr<nn::MoeExperts> experts;  // Transformers' experts, or the fused GroupedExperts
  nn::GatedMLP shared_expert;
  nn::Linear shared_expert_gate;  // H -> 1
};

class MixtralSparseMoeBlock final : public nn::FeedForward {
 public:
  MixtralSparseMoeBlock(const ModelConfig& config, int64_t index, nn::ParameterList& params);
  Tensor forward(const Tensor& hidden_states) const override;

 private:
  std::string path_ = "mlp";
  nn::TopKRouter gate;
  std::unique_ptr<nn::MoeExperts> experts;  // Transformers' experts, or the fused GroupedExperts
};

// Layer `index`'s feed-forward ("mlp"): its family's MoE block where the config makes it MoE, else
// the dense MLP of intermediate_size.
std::unique_ptr<nn::FeedForward> build_feed_forward(const ModelConfig& config, int64_t index, nn::ParameterList& params);

}  // namespace census
