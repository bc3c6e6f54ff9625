// The causal depthwise convolution of a gated delta net or a Mamba-2 mixer, as F.conv1d reaches ATen:
// conv1d of a batched input is aten.convolution (input (B, C, L), weight (C, 1, K), groups C, a bias
// (C) where the mixer's conv has one), whose result
// (B, C, L + 2P - K + 1) is laid out contiguously (a 3-d input suggests no channels-last format).
#include "ops/autocast.h"
#include "ops/internal.h"
#include "ops/ops.h"

namespace census::ops {
using internal::alloc;
using internal::dispatch;

namespace {

// convolution(Tensor input, Tensor weight, Tensor? bias, ...)
//   input, weight, bias: convolution_backward(grad, input, weight, bias->sym_sizes(), ..., grad_input_mask)
// -> saves input and weight; one backward op allocating the input's gradient, then the weight's, then
//    the bias's (its sizes are all the node keeps of it).
class ConvolutionBackward0 final : public Node {
 public:
  ConvolutionBackward0(uint64_t seq, Dims bias_sizes) : Node("ConvolutionBackward0", seq), bias_sizes_(std::move(bias_sizes)) {}
  GradList apply(GradList& grads) override {
    const Tensor input = input_.unpack();
    const Tensor weight = weight_.unpack();
    GradList out(3);
    std::vector<Tensor> results;
    if (should_compute_output(0)) results.push_back(out[0] = alloc(input.sizes(), grads[0].dtype()));
    if (should_compute_output(1)) results.push_back(out[1] = alloc(weight.sizes(), grads[0].dtype()));
    if (should_compute_output(2)) results.push_back(out[2] = alloc(bias_sizes_, grads[0].dtype()));
    const std::array<Tensor, 3> inputs{grads[0], input, weight};
    internal::dispatch(Op::kConvolutionBackward, inputs, results);
    return out;
  }
  SavedVariable input_{this};
  SavedVariable weight_{this};
  Dims bias_sizes_;
};

}  // namespace

Tensor conv1d_depthwise(const Tensor& input, const Tensor& weight, int64_t padding, const Tensor& bias) {
  if (const autocast::Wrap cast; cast) {
    const Tensor x = cast.lower(input), w = cast.lower(weight), b = cast.lower(bias);
    return conv1d_depthwise(x, w, padding, b);
  }
  auto node = make_node<ConvolutionBackward0>({&input, &weight, &bias}, bias.defined() ? bias.sizes() : Dims{});
  if (node) {
    node->input_.save(input);
    node->weight_.save(weight);
  }
  const int64_t length = input.size(2) + 2 * padding - weight.size(2) + 1;
  std::vector<Tensor> inputs{input, weight};
  if (bias.defined()) inputs.push_back(bias);
  Tensor out = internal::run_op(Op::kConvolution, inputs,
                                [&] { return alloc(Dims{input.size(0), weight.size(0), length}, input.dtype()); });
  set_history(out, node);
  return out;
}

}  // namespace census::ops
