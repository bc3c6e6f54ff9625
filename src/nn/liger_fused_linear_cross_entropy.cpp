#include "nn/liger_fused_linear_cross_entropy.h"

#include <algorithm>
#include <limits>

#include "ops/embedding.h"
#include "ops/internal.h"
#include "ops/ops.h"

namespace census::nn {

namespace {

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t next_power_of_2(int64_t n) {
  int64_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

// LigerFusedLinearCrossEntropyFunction's node: both gradients the forward made, handed back.
class LigerFusedLinearCrossEntropyFunctionBackward final : public Node {
 public:
  explicit LigerFusedLinearCrossEntropyFunctionBackward(uint64_t seq)
      : Node("LigerFusedLinearCrossEntropyFunctionBackward", seq) {}
  GradList apply(GradList& /*grads*/) override {
    GradList out(2);
    out[0] = grad_input_.unpack();
    if (has_grad_weight) out[1] = grad_weight_.unpack();
    // torch.equal(grad_output, torch.tensor(1.0, device=...)): the 0-d operand, gone with the statement;
    // where it is not 1, Triton's element_mul_kernel scales both in place.
    { const Tensor one = ops::scalar_tensor_fresh(); }
    return out;
  }
  SavedVariable grad_input_{this};
  SavedVariable grad_weight_{this};
  bool has_grad_weight = false;
};

// LigerFusedLinearCrossEntropyFunction.apply(_input (BT, H), weight (V, H), target (BT)), reduction "mean".
Tensor fused_linear_cross_entropy(const Tensor& input, const Tensor& weight, const Tensor& target) {
  auto node = make_node<LigerFusedLinearCrossEntropyFunctionBackward>({&input, &weight});
  Tensor loss;
  {
    NoGradGuard no_grad;  // an autograd.Function's forward
    const int64_t bt = input.size(0), hidden = input.size(1), vocab = weight.size(0);
    const int64_t chunk_size = next_power_of_2(cdiv(bt, cdiv(vocab, hidden)));
    const bool input_requires_grad = input.requires_grad();
    Tensor grad_input = ops::zeros_like(input);
    Tensor grad_weight = input_requires_grad && weight.requires_grad() ? ops::zeros_like(weight) : Tensor();
    Tensor loss_1d = ops::zeros(Dims{bt}, DType::kFloat32);
    Tensor target_mask = ops::ne(target, -100);
    ops::item(ops::sum(target_mask));  // total_n_non_ignore
    Tensor logits_chunk, grad_logits_chunk;  // the loop's names: a chunk's logits live until both are rebound
    for (int64_t start = 0; start < bt; start += chunk_size) {
      const int64_t end = std::min(start + chunk_size, bt);
      const Tensor input_chunk = ops::slice(input, 0, start, end);
      logits_chunk = ops::mm(input_chunk, ops::t(weight));
      // liger_cross_entropy_kernel writes loss_1d[start:end] and the logits' gradient in place;
      // loss_1d[start:end] = loss_1d_slice copies the slice onto itself.
      Tensor loss_slice = ops::slice(loss_1d, 0, start, end);
      ops::copy_(loss_slice, loss_slice);
      grad_logits_chunk = logits_chunk;
      if (input_requires_grad) {
        Tensor rows = ops::slice(grad_input, 0, start, end);
        ops::copy_(rows, ops::mm(grad_logits_chunk, weight));
      }
      if (grad_weight.defined()) {
        Tensor product = ops::mm(ops::t(grad_logits_chunk), input_chunk);
        product = ops::to(product, DType::kFloat32);
        ops::add_(grad_weight, product);
      }
    }
    loss = ops::sum(loss_1d);
    if (node) {
      node->grad_input_.save(grad_input.detach());
      if (grad_weight.defined()) {
        node->grad_weight_.save(grad_weight.detach());
        node->has_grad_weight = true;
      }
    }
    // The function's locals go as it returns, in the order they were bound.
    loss_1d = Tensor();
    target_mask = Tensor();
    logits_chunk = Tensor();
    grad_logits_chunk = Tensor();
  }
  set_history(loss, node);
  return loss;
}

}  // namespace

Tensor liger_for_causal_lm_loss(const Tensor& hidden_states, const Tensor& lm_head_weight, const Tensor& labels) {
  const Tensor padded = ops::constant_pad(labels, 0, 1);
  const Tensor shift_labels = ops::contiguous(ops::slice(padded, -1, 1, std::numeric_limits<int64_t>::max()));
  const int64_t width = hidden_states.size(-1);
  const Tensor flat = ops::view(hidden_states, Dims{hidden_states.numel() / width, width});
  return fused_linear_cross_entropy(flat, lm_head_weight, ops::view(shift_labels, Dims{shift_labels.numel()}));
}

}  // namespace census::nn
