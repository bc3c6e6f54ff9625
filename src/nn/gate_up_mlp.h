// File: gate_up_mlp.h
// The gated MLP with its gate and up projections fused in one Linear (Phi-3's Phi3MLP):
//
//   up_states = gate_up_proj(x)                 (.., 2I): [gate | up]
//   gate, up_states = up_states.chunk(2, dim=-1)   two views of it
//   up_states = up_states * act(gate)
//   down_proj(up_states)
//
//   the fused (.., 2I) output saved once, by the activation (gate) and the product (up); act (.., I)
//   saved by the product; the product (.., I) by down_proj; x by gate_up_proj.
#pragma once

#include "nn/linear.h"
#include "nn/mlp.h"

namespace census::nn {

class GateUpMLP final : public FeedForward {
 public:
  // `activation_name`: the activation module's name in the MLP ("activation_fn" in Phi-3).
  GateUpMLP(const std::string& path, int64_t hidden_size, int64_t intermediate_size, ParameterList& params,
            HiddenAct act, const char* activation_name);
  Tensor forward(const Tensor& hidden_states) const override;

 private:
  std::string path_;
  Linear gate_up_proj;  // H -> 2I
  Linear down_proj;     // I -> H
  Activation activation_fn;
};

}  // namespace census::nn
