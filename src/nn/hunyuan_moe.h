// File: hunyuan_moe.h
// Hunyuan-MoE's MoE block (transformers/models/hunyuan_v1_moe/modeling_hunyuan_v1_moe.py, Transformers
// 5): a dense shared MLP on the input, a softmax router whose linear (wg) is built in fp32, the routed
// experts, and the sum.
//
// Legend: T = tokens, H = hidden_size, E = experts, K = experts per token.
#pragma once

#include <memory>

#include "nn/linear.h"
#include "nn/mlp.h"
#include "nn/moe.h"

namespace census::nn {

// HunYuanMoEV1Gate: logits = wg(x.float()) with wg an fp32 Linear (E, H); probs = softmax (fp32);
// the top K renormalized in place; cast to the logits' dtype, fp32 (so the weights stay fp32).
//   saves: the fp32 copy of x (T, H) by wg; probs (T, E) by softmax; the indices by topk; a clone of
//   the top-k values (T, K) and their sum (T, 1) by the in-place div.
class HunYuanMoEV1Gate {
 public:
  HunYuanMoEV1Gate(std::string path, int64_t num_experts, int64_t top_k, int64_t hidden_size, ParameterList& params);
  Routing forward(const Tensor& hidden_states) const;

 private:
  std::string path_;
  int64_t top_k_;
  Linear wg;  // H -> E, fp32
};

// HunYuanMoEV1Moe: the shared MLP on the (B, S, H) input; the router and experts on its (T, H) view;
// the experts' output reshaped (B, S, H) plus the shared MLP's.
class HunYuanMoEV1Moe final : public FeedForward {
 public:
  // `gate` and `experts` are built by the caller in the order the block registers them; the shared
  // MLP (shared_mlp, `shared_intermediate_size` wide) is registered last.
  HunYuanMoEV1Moe(std::string path, HunYuanMoEV1Gate gate, std::unique_ptr<MoeExperts> experts, int64_t hidden_size,
                  int64_t shared_intermediate_size, HiddenAct act, ParameterList& params);
  Tensor forward(const Tensor& hidden_states) const override;

 private:
  std::string path_;
  HunYuanMoEV1Gate gate;
  std::unique_ptr<MoeExperts> experts;
  GatedMLP shared_mlp;
};

}  // namespace census::nn
