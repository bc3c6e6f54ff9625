// File: deepseek_moe.h
// DeepSeek-V3's mixture of experts (transformers/models/deepseek_v3/modeling_deepseek_v3.py,
// Transformers 5), which GLM-4.5's Glm4MoeMoE (its bias in fp32) and Kimi K2 copy: the group-limited sigmoid router,
// the routed experts and the shared experts, added.
//
// Legend: T = tokens, H = hidden_size, E = routed experts, G = n_group, K = experts per token.
#pragma once

#include <optional>

#include "nn/mlp.h"
#include "nn/moe.h"

namespace census::nn {

struct GroupLimitedRouting {
  int64_t num_experts = 0;
  int64_t top_k = 0;
  int64_t n_group = 1;
  int64_t topk_group = 1;
  bool norm_topk_prob = true;
  double routed_scaling_factor = 1.0;
  // The dtype of the e_score_correction_bias buffer: the model's default dtype (unset) where the class
  // makes it plainly (DeepSeek-V3), fp32 where it states float32 (GLM-4.5, DeepSeek-V3.2, GLM-5).
  std::optional<DType> correction_bias_dtype = std::nullopt;
};

// DeepseekV3TopkRouter, in fp32 throughout: sigmoid scores; the top G' of G groups (each scored by
// its two best experts, e_score_correction_bias added) bound the top-K choice; the chosen scores,
// renormalized and scaled by routed_scaling_factor, are the fp32 weights.
//   saves: fp32 copies of x (T, H) and of the weight (E, H); the scores (T, E); the indices;
//   a clone of the gathered weights (T, K) and their denominator (T, 1).
class DeepseekV3TopkRouter {
 public:
  DeepseekV3TopkRouter(std::string path, const GroupLimitedRouting& routing, int64_t hidden_size,
                       ParameterList& params);
  Routing forward(const Tensor& hidden_states) const;
  const Tensor& e_score_correction_bias() const { return e_score_correction_bias_; }

 private:
  std::string path_;
  GroupLimitedRouting routing_;
  Tensor weight_;                   // (E, H)
  Tensor e_score_correction_bias_;  // (E), a buffer
};

// DeepseekV3MoE: routed on the layer's input (B, S, H), the experts on its (T, H) view, and the
// shared experts (one GatedMLP of n_shared_experts * I) on the input, added to the experts' output.
class DeepseekV3MoE final : public FeedForward {
 public:
  struct Sizes {
    int64_t hidden_size;
    int64_t moe_intermediate_size;  // an expert's width, I
    int64_t shared_intermediate_size;
    HiddenAct act;
    ExpertsImplementation implementation;
    // The rank holds num_experts / expert_parallel of the experts; the router picks among all.
    int64_t expert_parallel = 1;
  };
  DeepseekV3MoE(std::string path, const GroupLimitedRouting& routing, const Sizes& sizes, ParameterList& params);
  Tensor forward(const Tensor& hidden_states) const override;
  std::vector<Tensor> buffers() const override { return {gate.e_score_correction_bias()}; }

 private:
  std::string path_;
  Experts experts;
  DeepseekV3TopkRouter gate;
  GatedMLP shared_experts;
};

}  // namespace census::nn
