// File: muon.h
// torch.optim.Muon() (lr 1e-3, weight decay 0.1, momentum 0.95, Nesterov, 5 Newton-Schulz steps) as
// torch/optim/_muon.py (torch 2.14) runs its step() and zero_grad(set_to_none=True), over the model's 2-D
// weights but its embeddings' and its head's; torch.optim.AdamW(lr=1e-4) in its foreach form (nn/adamw.h)
// over the rest (the embeddings, the head, the norms' and other vectors, 3-D experts), as torchtitan
// pairs them; Muon steps first, then AdamW.
//
//   _init_group, for each parameter with a gradient and no state yet:
//     state["momentum_buffer"] = zeros_like(grad)
//   _single_tensor_muon (its only form), for each parameter:
//     buf.lerp_(grad, 1 - momentum)
//     update = grad.lerp(buf, momentum)              a new tensor of the gradient's size; the previous
//                                                    parameter's lives until the name is rebound
//     update = _zeropower_via_newtonschulz(update):  the one passed in lives through it
//       X = update.bfloat16()                        itself where bf16; X.T where rows > columns (a view)
//       X.div_(X.norm().clamp(min=eps))              two 0-d temporaries
//       5 x: gram = X @ X.T                          (m, m), m = the smaller dim; the previous iteration's
//            gram_update = addmm(gram, gram, gram)   gram and gram_update live until rebound
//            X = addmm(X, gram_update, X)            (m, n): a new X, the previous freed
//     param.mul_(1 - lr * weight_decay); param.add_(update, alpha=-adjusted_lr)
#pragma once

#include <memory>
#include <vector>

#include "nn/adamw.h"
#include "nn/optimizer.h"

namespace census::nn {

class Muon final : public Optimizer {
 public:
  // `matrices`: the parameters Muon steps; `others`: those AdamW steps.
  Muon(std::vector<Tensor> matrices, std::vector<Tensor> others, Hooks hooks);

  // Whether torchtitan's pairing gives `param` to Muon: a 2-D weight that is no embedding's
  // ("model.embed_tokens...") and not the head's ("lm_head...").
  static bool steps(const Tensor& param);

  void step() override;
  void make_states() override;
  std::vector<Tensor> drop_states_without_grad() override;
  std::vector<Tensor> drop_states() override;
  void zero_grad() override;
  int64_t state_bytes() const override;
  int64_t unified_memory_bytes() const override;

 private:
  void make_state(size_t i) override;  // the momentum buffer, zeros of the gradient's layout

  std::unique_ptr<AdamW> adamw_;
};

}  // namespace census::nn
