// The fused Mamba-2 kernel's contract: mamba_ssm's mamba_split_conv1d_scan_combined (its
// MambaSplitConv1dScanCombinedFn, a torch.autograd.Function), shapes only. One Function from the
// projection to the output projection: the split, the causal conv, the chunked scan, the gated
// RMSNorm and out_proj all run inside it, where autograd sees no op.
//
//   out = fn(zxbcdt, conv1d_weight, conv1d_bias, dt_bias, A, D, rmsnorm_weight, outproj_weight)
//     zxbcdt (B, S, I + conv_dim + Nh); A (Nh) fp32; the rest parameters
//   forward: out_x = empty(B, S, Nh, P) in zxbcdt's dtype (the scan's output before the norm);
//            rstd = empty(B * S * G) fp32 where there is a norm; out = empty(B, S, H)
//            save (zxbcdt, conv1d_weight, conv1d_bias, out_x, A, D, dt_bias, rmsnorm_weight, rstd,
//                  outproj_weight), as save_for_backward lists them (initial_states, seq_idx and
//                  outproj_bias are None here)
//   backward: every saved tensor unpacked; empty_like of each differentiable input
//
// It is no aten op: observers see its factories, and a selective policy recomputes them.
#include "ops/internal.h"
#include "ops/ops.h"

namespace census::ops {

namespace {

class MambaSplitConv1dScanCombinedBackward final : public Node {
 public:
  static constexpr size_t kMaxSaved = 10;
  explicit MambaSplitConv1dScanCombinedBackward(uint64_t seq) : Node("MambaSplitConv1dScanCombinedFnBackward", seq) {}
  GradList apply(GradList& /*grads*/) override {
    // ctx.saved_tensors unpacks them all; the inputs' gradients, in apply()'s argument order.
    std::vector<Tensor> saved;
    for (size_t i = 0; i < saved_count_; ++i) saved.push_back(saved_[i].unpack());
    GradList out(inputs_.size());
    for (size_t i = 0; i < inputs_.size(); ++i)
      if (inputs_[i].defined) out[i] = empty(inputs_[i].sizes, inputs_[i].dtype);
    return out;
  }
  struct Input {
    bool defined;
    Dims sizes;
    DType dtype;
  };
  SavedVariableList saved_{this, kMaxSaved};
  size_t saved_count_ = 0;
  std::vector<Input> inputs_;  // shapes only: what each gradient is allocated as
};

}  // namespace

Tensor mamba_split_conv1d_scan_combined(const Tensor& zxbcdt, const Tensor& conv1d_weight, const Tensor& conv1d_bias,
                                        const Tensor& dt_bias, const Tensor& A, const Tensor& D,
                                        const Tensor& rmsnorm_weight, const Tensor& outproj_weight,
                                        int64_t num_heads, int64_t head_dim, int64_t n_groups) {
  // The Function's node is made as apply() starts, before its forward runs.
  auto node = make_node<MambaSplitConv1dScanCombinedBackward>(
      {&zxbcdt, &conv1d_weight, &conv1d_bias, &dt_bias, &A, &D, &rmsnorm_weight, &outproj_weight});
  const int64_t batch = zxbcdt.size(0), seq = zxbcdt.size(1);
  Tensor out_x = empty(Dims{batch, seq, num_heads, head_dim}, zxbcdt.dtype());
  Tensor rstd = rmsnorm_weight.defined() ? empty(Dims{batch * seq * n_groups}, DType::kFloat32) : Tensor();
  Tensor out = empty(Dims{batch, seq, outproj_weight.size(0)}, zxbcdt.dtype());
  set_history(out, node);
  if (node) {
    for (const Tensor* input : {&zxbcdt, &conv1d_weight, &conv1d_bias, &dt_bias, &A, &D, &rmsnorm_weight, &outproj_weight})
      node->inputs_.push_back({input->defined(), input->defined() ? input->sizes() : Dims{},
                               input->defined() ? input->dtype() : DType::kBFloat16});
    const Tensor* saved[] = {&zxbcdt, &conv1d_weight, &conv1d_bias, &out_x,          &A,
                             &D,      &dt_bias,       &rmsnorm_weight, &rstd, &outproj_weight};
    for (const Tensor* each : saved) {
      if (!each->defined()) continue;
      node->saved_[node->saved_count_++].save(*each);
    }
  }
  return out;
}

}  // namespace census::ops
