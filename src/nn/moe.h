// File: moe.h
// The pieces of Transformers 5's mixture-of-experts blocks that families share: the softmax top-k
// router (Qwen2-MoE, Qwen3-MoE, Qwen3-Next, Mixtral) and the experts, whose weights are stacked in
// 3-d parameters and which run as the experts implementation selects (transformers/integrations/moe.py).
//
// Legend: T = tokens (batch * seq), H = hidden_size, E = experts, K = experts per token, S = T * K
// (token-expert pairs), I = an expert's intermediate width.
#pragma once

#include "nn/linear.h"
#include "nn/mlp.h"

namespace census::nn {

// How the experts run: `grouped_mm` (Transformers' default, which the census sets as the reference
// does) sorts the S pairs by expert and runs two _grouped_mm over all experts; `eager` is the
// experts class's own forward, a Python loop over the experts that were hit.
//
// Note [Eager experts under shapes alone] Which tokens an expert receives is data; a census has
// shapes only. The eager loop is priced under balanced routing: pair p = t * K + k goes to expert
// p % E, so every expert is hit (when S >= E) and receives S / E pairs (the first S % E one more).
// What the loop saves per expert grows with the pairs it receives, so the saved bytes are those of
// any routing that hits every expert; what depends on the routing is how many experts are hit (a
// weight-gradient buffer and the ops per expert hit) and, slightly, the backward's peak.
enum class ExpertsImplementation : uint8_t { kGroupedMm, kEager };

// What a router hands the experts. `weights` are in the router's dtype: bf16 where it casts its
// top-k values back to the logits' dtype (Qwen), fp32 where it keeps them (Mixtral, DeepSeek-V3).
struct Routing {
  Tensor logits;   // (T, E), returned to the block and dropped when it returns
  Tensor weights;  // (T, K)
  Tensor indices;  // (T, K) int64
};

// Qwen2MoeTopKRouter / Qwen3MoeTopKRouter / MixtralTopKRouter: logits = x W^T; probs = softmax in
// fp32; top-k; optionally renormalized in place; optionally cast back to the logits' dtype.
//   saves: x (T, H) by the linear; probs (T, E) fp32 by softmax; the indices by topk; where it
//   renormalizes, a clone of the values (T, K) fp32 and their sum (T, 1) fp32 by the in-place div.
class TopKRouter {
 public:
  struct Options {
    bool norm_topk_prob;
    bool weights_in_logits_dtype;  // Qwen's `.to(router_logits.dtype)`; Mixtral keeps fp32
  };
  TopKRouter(std::string path, int64_t num_experts, int64_t top_k, int64_t hidden_size, Options options,
             ParameterList& params);
  Routing forward(const Tensor& hidden_states) const;

 private:
  std::string path_;
  int64_t top_k_;
  Options options_;
  Tensor weight_;  // (E, H)
};

// The experts of a MoE block, behind Transformers' Experts interface: hidden_states (T, H),
// top_k_index (T, K) int64, top_k_weights (T, K); returns (T, H) in the hidden states' dtype.
class MoeExperts {
 public:
  virtual ~MoeExperts() = default;
  virtual Tensor forward(const Tensor& hidden_states, const Tensor& top_k_index, const Tensor& top_k_weights) const = 0;
};

// How a family stores and gates its experts (the flags @use_experts_implementation sets).
struct ExpertsLayout {
  bool transposed = false;  // gate_up_proj (E, H, 2I) and down_proj (E, I, H), used untransposed
  bool has_bias = false;    // gate_up_proj_bias (E, 2I) and down_proj_bias (E, H), gathered per pair
  // GptOssExperts._apply_gate: gate and up interleaved, clamped to +-limit (gate from above only),
  // gate * sigmoid(alpha * gate) * (up + 1). Otherwise act(gate) * up on the two halves.
  bool gpt_oss_gate = false;
  double limit = 7.0;
  double alpha = 1.702;
  // has_gate=False (NemotronHExperts): up_proj (E, I, H) in place of gate_up_proj, the activation alone.
  bool has_gate = true;
  // DeepseekV4Experts._apply_gate: the two halves, gate clamped from above and up to +-limit, then
  // act(gate) * up (limit: swiglu_limit).
  bool clamped_halves = false;
};

// The experts of a MoE block (Qwen3MoeExperts and its copies): gate_up_proj (E, 2I, H) with the gate
// rows first, down_proj (E, H, I); GPT-OSS's transposed, biased and interleaved (ExpertsLayout).
//
// grouped_mm, per token-expert pair (S rows), saves: the gathered inputs (S, H) and the gated
// product (S, I) by the two _grouped_mm, the up projection (S, 2I) by the activation and the
// product, the activation's output (S, I), the down projection (S, H) and the routing weights
// (S, 1) by the weighting, the int64 gather indices (three of S), the sentinel mask (S, 1) bool and
// the int32 offsets (E).
class Experts final : public MoeExperts {
 public:
  Experts(std::string path, int64_t num_experts, int64_t hidden_size, int64_t intermediate_size, HiddenAct act,
          ExpertsImplementation implementation, ParameterList& params, ExpertsLayout layout = {});
  Tensor forward(const Tensor& hidden_states, const Tensor& top_k_index, const Tensor& top_k_weights) const override;

 private:
  Tensor grouped_mm_forward(const Tensor& hidden_states, const Tensor& top_k_index, const Tensor& top_k_weights) const;
  Tensor eager_forward(const Tensor& hidden_states, const Tensor& top_k_index, const Tensor& top_k_weights) const;
  // input (S, in) times each group's expert weight, plus its gathered bias (added in place).
  Tensor grouped_linear(const Tensor& input, const Tensor& weight, const Tensor& offsets, const Tensor& bias) const;
  // The gated activation of the up projection (S, 2I) -> (S, I).
  Tensor apply_gate(const Tensor& gate_up) const;

  std::string path_;
  int64_t num_experts_;
  ExpertsImplementation implementation_;
  ExpertsLayout layout_;
  Tensor gate_up_proj_;       // (E, 2I, H), transposed (E, H, 2I)
  Tensor gate_up_proj_bias_;  // (E, 2I) or undefined
  Tensor down_proj_;          // (E, H, I), transposed (E, I, H)
  Tensor down_proj_bias_;     // (E, H) or undefined
  Activation act_fn_;
};

}  // namespace census::nn
