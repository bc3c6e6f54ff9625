#include "nn/adamw8bit.h"

#include "ops/dispatch.h"
#include "ops/ops.h"

namespace census::nn {

namespace {

constexpr int64_t kBlockSize = 256, kPagedFrom = 100'000, kQuantileMapSize = 256;

}  // namespace

void AdamW8bit::add_state_buffer(size_t i, DType dtype) {
  if (paged_ && params_[i].numel() >= kPagedFrom) {
    // F.get_paged: cudaMallocManaged, wrapped as a tensor; no allocator op sees it.
    add_unified_state(i, make_tensor(params_[i].sizes(), dtype));
    return;
  }
  add_state(i, ops::zeros_like(params_[i], dtype));
}

void AdamW8bit::make_state(size_t i) {
  if (!eight_bit(i)) {
    add_state_buffer(i, DType::kFloat32);
    add_state_buffer(i, DType::kFloat32);
    return;
  }
  if (shared_states().empty()) {
    // name2qmap["dynamic"].to(p.device), then "udynamic": CUDA's copy of each host map (a fresh fp32 [256]),
    // on the device from the first 8-bit state on.
    for (int map = 0; map < 2; ++map) add_shared_state(ops::empty(Dims{kQuantileMapSize}, DType::kFloat32));
  }
  add_state_buffer(i, DType::kUInt8);
  add_state_buffer(i, DType::kUInt8);
  const int64_t blocks = (params_[i].numel() + kBlockSize - 1) / kBlockSize;
  add_state(i, ops::zeros(Dims{blocks}, DType::kFloat32));
  add_state(i, ops::zeros(Dims{blocks}, DType::kFloat32));
}

void AdamW8bit::step() {
  NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!has_grad(i)) continue;
    if (!made(i)) make_state(i);
    Tensor param = params_[i];
    const Tensor g = grad(i);
    if (eight_bit(i)) {
      const std::array<Tensor, 4> maps_and_maxima{shared_states()[0], shared_states()[1], state(i, kAbsmax1),
                                                  state(i, kAbsmax2)};
      ops::bnb_optimizer_update_8bit_blockwise(param, g, state(i, kState1), state(i, kState2), maps_and_maxima);
    } else {
      ops::bnb_optimizer_update_32bit(param, g, state(i, kState1), state(i, kState2));
    }
  }
}

}  // namespace census::nn
