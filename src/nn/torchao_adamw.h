// File: torchao_adamw.h
// torchao's AdamW8bit(params) and AdamW4bit(params) (lr 1e-3, weight decay 1e-2), as torchao/optim/adam.py
// (_AdamBase, commit 36027d8) runs step() and zero_grad(set_to_none=True).
//
//   step(), for each parameter with a gradient, in order:
//     where it has no state yet: state["step"] = torch.tensor(0.0), on the host; then exp_avg (signed) and
//     exp_avg_sq (unsigned), each _new_buffer(p):
//       numel >= 4096 and numel % block == 0   OptimState8bit.zeros (block 256): codes uint8 of p's shape,
//                                              scale fp32 [numel / 256], qmap torch.tensor(the map) fp32 [256];
//                                              OptimState4bit.zeros (block 128): codes uint8 [numel / 2],
//                                              scale fp32 [numel / 128], qmap fp32 [16]
//       else                                   zeros_like(p), in p's dtype
//     state["step"] += 1; then torch.compile(single_param_adam)(p, grad, step, exp_avg, exp_avg_sq, ...)
//
// The compiled update is a fused kernel that does not run on fake tensors, and its eager form's fp32
// copies of p, grad and both moments are not what it allocates: it is stood in for by a kernel that
// writes the parameter and its states in place and allocates nothing. What Inductor's generated kernel
// keeps in buffers of its own for the blocks' maxima is not priced.
#pragma once

#include <vector>

#include "nn/optimizer.h"

namespace census::nn {

class TorchaoAdamW final : public Optimizer {
 public:
  // bits: 8 (AdamW8bit) or 4 (AdamW4bit).
  TorchaoAdamW(std::vector<Tensor> params, int bits, Hooks hooks)
      : Optimizer(std::move(params), std::move(hooks)), bits_(bits) {}

  void step() override;

 private:
  void make_state(size_t i) override;
  // _new_buffer: a quantized state's codes, scale and qmap, or a plain one.
  void add_buffer(size_t i);
  int64_t block_size() const { return bits_ == 8 ? 256 : 128; }

  int bits_;
};

}  // namespace census::nn
