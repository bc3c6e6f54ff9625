// File: adamw8bit.h
// bitsandbytes' AdamW8bit(params) and PagedAdamW8bit(params) (lr 1e-3, betas (0.9, 0.999), eps 1e-8,
// weight decay 1e-2, min_8bit_size 4096, no max_unorm), as bitsandbytes/optim/optimizer.py
// (Optimizer2State, commit 95f9af3) runs step() and zero_grad(set_to_none=True).
//
//   construction         the two quantile maps, create_dynamic_map(signed=True / False): fp32 [256] each,
//                        on the host
//   step(), for each parameter with a gradient, in order:
//     init_state, where the parameter has no state yet:
//       numel < 4096     state1, state2: zeros_like(p, dtype=float32)
//       else             at the first such parameter, each quantile map .to(p.device): 2 x 1 KiB on the
//                        device, shared by every parameter from then on; state1, state2:
//                        zeros_like(p, dtype=uint8); absmax1, absmax2: torch.zeros(ceil(numel / 256),
//                        float32)
//     update_step        p.data.contiguous() and p.grad.contiguous() (no copy of a dense tensor), then one
//                        kernel, optimizer_update_32bit or optimizer_update_8bit_blockwise, in place,
//                        allocating nothing; state["step"] is a Python int
//
// Paged (PagedAdamW8bit): a state1 or state2 of a parameter of 100,000 elements or more is
// F.get_paged's cudaMallocManaged buffer, outside PyTorch's caching allocator: held in unified memory
// (Optimizer::unified_memory_bytes), which the driver pages between host and device, and not in the
// device's allocated bytes. The block maxima and the small parameters' states stay on the device.
#pragma once

#include <vector>

#include "nn/optimizer.h"

namespace census::nn {

class AdamW8bit final : public Optimizer {
 public:
  // paged: PagedAdamW8bit.
  AdamW8bit(std::vector<Tensor> params, bool paged, Hooks hooks)
      : Optimizer(std::move(params), std::move(hooks)), paged_(paged) {}

  void step() override;

 private:
  enum Slot : size_t { kState1, kState2, kAbsmax1, kAbsmax2 };
  void make_state(size_t i) override;
  bool eight_bit(size_t i) const { return params_[i].numel() >= 4096; }
  // get_state_buffer: zeros_like(p, dtype), or a paged buffer for a parameter of 1e5 elements or more.
  void add_state_buffer(size_t i, DType dtype);

  bool paged_;
};

}  // namespace census::nn
