#include "nn/torchao_adamw.h"

#include "ops/ops.h"

namespace census::nn {

void TorchaoAdamW::add_buffer(size_t i) {
  const Tensor& p = params_[i];
  const int64_t n = p.numel();
  if (n < 4096 || n % block_size() != 0) {
    add_state(i, ops::zeros_like(p));
    return;
  }
  add_state(i, bits_ == 8 ? ops::zeros(p.sizes(), DType::kUInt8) : ops::zeros(Dims{n / 2}, DType::kUInt8));
  add_state(i, ops::zeros(Dims{n / block_size()}, DType::kFloat32));
  add_state(i, ops::tensor_fresh(Dims{bits_ == 8 ? 256 : 16}, DType::kFloat32));  // torch.tensor(the map)
}

void TorchaoAdamW::make_state(size_t i) {
  Tensor step = ops::scalar_tensor_fresh();
  add_state(i, step);
  on_host(step);
  add_buffer(i);  // exp_avg
  add_buffer(i);  // exp_avg_sq
}

void TorchaoAdamW::step() {
  NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!has_grad(i)) continue;
    if (!made(i)) make_state(i);
    ops::add_(state(i, 0), 1.0);  // state["step"] += 1
    // torch.compile(single_param_adam)(...): the stand-in kernel, in place, allocating nothing.
  }
}

}  // namespace census::nn
