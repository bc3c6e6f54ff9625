// File: hash_moe.h
// DeepSeek-V4's mixture of experts (DeepseekV4SparseMoeBlock, transformers/models/deepseek_v4/
// modeling_deepseek_v4.py): a router, the routed experts with a clamped SwiGLU, and one shared
// expert (DeepseekV4MLP) beside them, summed.
//
// Legend: T = tokens, H = hidden_size, E = experts, K = experts per token, I = moe_intermediate_size.
//
// Both routers score with sqrt(softplus(x W^T)) (T, E) in the hidden states' dtype (softplus keeps the
// logits, sqrt its result), gather the K chosen scores (the gather keeps the scores and the indices),
// normalize them (the division keeps them and their sum) and scale them by routed_scaling_factor:
//   DeepseekV4TopKRouter  chooses top-k of scores + e_score_correction_bias (topk keeps the indices)
//   DeepseekV4HashRouter  reads the choice from its frozen tid2eid table at the input_ids (T, K) int64
// DeepseekV4MLP (the shared expert): down(act(gate(x).clamp(max=l)) * up(x).clamp(-l, l)), which keeps
// x, both projections, both clamped values, the activation's output and the product.
#pragma once

#include <memory>

#include "nn/moe.h"

namespace census::nn {

struct DeepseekV4MoeSizes {
  int64_t hidden_size;
  int64_t num_experts;
  int64_t top_k;
  int64_t intermediate_size;  // the experts' and the shared expert's width
  int64_t vocab_size;         // the hash table's rows
  double routed_scaling_factor;
  double swiglu_limit;
  HiddenAct act;
  ExpertsImplementation experts_implementation;
  // The rank holds num_experts / expert_parallel of the experts; the routers pick among all.
  int64_t expert_parallel = 1;
};

class ClampedSwiGluMlp {
 public:
  ClampedSwiGluMlp(const std::string& path, int64_t hidden_size, int64_t intermediate_size, double limit, HiddenAct act,
                   ParameterList& params);
  Tensor forward(const Tensor& x) const;

 private:
  std::string path_;
  Linear gate_proj;
  Linear up_proj;
  Linear down_proj;
  Activation act_fn;
  double limit_;
};

// The sqrt-softplus router: top-k over the biased scores, or (`hash`) the tid2eid lookup.
class DeepseekV4Router {
 public:
  DeepseekV4Router(std::string path, const DeepseekV4MoeSizes& sizes, bool hash, ParameterList& params);
  // `input_ids` (B, S) int64: read by the hash router only.
  Routing forward(const Tensor& hidden_states, const Tensor& input_ids) const;
  // Its buffer: the top-k router's e_score_correction_bias, or the hash router's tid2eid.
  std::vector<Tensor> buffers() const { return {hash_ ? tid2eid_ : e_score_correction_bias_}; }

 private:
  std::string path_;
  DeepseekV4MoeSizes sizes_;
  bool hash_;
  Tensor weight_;                  // (E, H)
  Tensor e_score_correction_bias_;  // (E), a buffer of the default dtype (top-k router)
  Tensor tid2eid_;                 // (V, K) int64, a buffer (hash router)
};

class DeepseekV4SparseMoeBlock {
 public:
  DeepseekV4SparseMoeBlock(const std::string& path, const DeepseekV4MoeSizes& sizes, bool hash, ParameterList& params);
  Tensor forward(const Tensor& hidden_states, const Tensor& input_ids) const;
  std::vector<Tensor> buffers() const { return gate.buffers(); }

 private:
  std::string path_;
  DeepseekV4Router gate;
  Experts experts;
  ClampedSwiGluMlp shared_experts;
};

}  // namespace census::nn
