// nn.LayerNorm and gt.Tensor. Above each node, the derivatives.yaml entry it follows.
#include "ops/layer_norm.h"

#include "ops/internal.h"
#include "ops/ops.h"

namespace census::ops {
using internal::alloc;
using internal::dispatch;

namespace {

// native_layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight, Tensor? bias, float eps)
//   input, weight, bias: "grad.defined() ? native_layer_norm_backward_symint(grad, input, normalized_shape,
//                         result1, result2, weight, bias, grad_input_mask) : ..."
// -> keeps input, weight, bias, and its outputs mean (result1) and rstd (result2); the backward
// allocates one gradient per input it needs.
class NativeLayerNormBackward0 final : public Node {
 public:
  explicit NativeLayerNormBackward0(uint64_t seq) : Node("NativeLayerNormBackward0", seq) {}
  GradList apply(GradList& grads) override {
    const Tensor input = input_.unpack(), weight = weight_.unpack(), bias = bias_.unpack();
    const Tensor mean = mean_.unpack(), rstd = rstd_.unpack();
    GradList out(3);
    if (should_compute_output(0)) out[0] = alloc(input.sizes(), input.dtype());
    if (should_compute_output(1)) out[1] = alloc(weight.sizes(), weight.dtype());
    if (should_compute_output(2)) out[2] = alloc(bias.sizes(), bias.dtype());
    const std::array<Tensor, 6> inputs{grads[0], input, mean, rstd, weight, bias};
    std::vector<Tensor> outputs;
    for (const Tensor& each : out)
      if (each.defined()) outputs.push_back(each);
    dispatch(Op::kNativeLayerNormBackward, inputs, outputs);
    return out;
  }
  // Released in this order once the node has run.
  SavedVariable input_{this}, weight_{this}, bias_{this}, mean_{this}, rstd_{this};
};

}  // namespace

Tensor layer_norm(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  auto node = make_node<NativeLayerNormBackward0>({&input, &weight, &bias});
  Dims stat_sizes = input.sizes();
  stat_sizes[stat_sizes.size() - 1] = 1;
  Tensor out = alloc(input.sizes(), input.dtype());
  Tensor mean = alloc(stat_sizes, input.dtype());
  Tensor rstd = alloc(stat_sizes, input.dtype());
  dispatch<3, 3>(Op::kNativeLayerNorm, {input, weight, bias}, {out, mean, rstd});
  if (node) {
    node->input_.save(input);
    node->weight_.save(weight);
    node->bias_.save(bias);
    node->mean_.save(mean, /*is_output=*/true);
    node->rstd_.save(rstd, /*is_output=*/true);
  }
  set_history(out, node);
  return out;
}

Tensor gt(const Tensor& self, const Tensor& other) {
  Tensor out = alloc(internal::broadcast_sizes(self.sizes(), other.sizes()), DType::kBool);
  dispatch<2, 1>(Op::kGtTensor, {self, other}, {out});
  return out;
}

}  // namespace census::ops
