// File: mlp.h
// The gated MLP of Llama and its copies: down_proj(act_fn(gate_proj(x)) * up_proj(x)).
//
//   gate (.., I) saved by the activation; act (.., I) and up (.., I) saved by their product;
//   the product (.., I) saved by down_proj; x saved once by gate_proj and up_proj.
#pragma once

#include "nn/liger_kernels.h"
#include "nn/linear.h"

namespace census::nn {

// ACT2FN[hidden_act]: Transformers' SiLUActivation ("silu", F.silu) or GELUTanh ("gelu_pytorch_tanh",
// F.gelu with the tanh approximation), each saving its input; or ReLUSquaredActivation ("relu2",
// Nemotron-H's: relu, which keeps its result, then torch.square, pow(x, 2), which keeps that again).
enum class HiddenAct : uint8_t { kSilu, kGeluTanh, kRelu2 };

class Activation {
 public:
  Activation(std::string path, HiddenAct act) : path_(std::move(path)), act_(act) {}
  Tensor forward(const Tensor& input) const;

 private:
  std::string path_;
  HiddenAct act_;
};

// A decoder layer's feed-forward: a dense MLP or a mixture of experts (nn/moe.h).
class FeedForward {
 public:
  virtual ~FeedForward() = default;
  virtual Tensor forward(const Tensor& hidden_states) const = 0;
  // The buffers its modules register (a router's e_score_correction_bias), which a model holds.
  virtual std::vector<Tensor> buffers() const { return {}; }
};

class GatedMLP final : public FeedForward {
 public:
  // `activation_name`: the activation module's name in the MLP ("activation_fn" in Llama 4's).
  // `liger`: LigerSwiGLUMLP's (or LigerGEGLUMLP's) forward bound on the module, as Liger's patch binds it
  // (nn/liger_kernels.h): down_proj(LigerSiLUMulFunction.apply(gate_proj(x), up_proj(x))), act_fn left unused.
  GatedMLP(const std::string& path, int64_t hidden_size, int64_t intermediate_size, bool bias, ParameterList& params,
           HiddenAct act = HiddenAct::kSilu, const char* activation_name = "act_fn", LigerMul liger = LigerMul::kNone);
  Tensor forward(const Tensor& x) const override;

 private:
  std::string path_;
  Linear gate_proj;
  Linear up_proj;
  Linear down_proj;
  Activation act_fn;
  LigerMul liger_;
};

}  // namespace census::nn
