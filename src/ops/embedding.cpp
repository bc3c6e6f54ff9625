// The token embedding and the random inputs of a training step.
#include "ops/internal.h"
#include "ops/ops.h"

namespace census::ops {
using internal::alloc;
using internal::dispatch;

namespace {

// embedding(Tensor weight, Tensor indices, SymInt padding_idx, bool scale_grad_by_freq, bool sparse)
//   weight: embedding_backward(grad, indices, weight.sym_size(0), ...)   -> saves indices
// Dense (sparse=False): embedding_dense_backward returns the whole (V, H) gradient in grad's dtype,
// contiguous, which AccumulateGrad steals as the weight's .grad.
class EmbeddingBackward0 final : public Node {
 public:
  EmbeddingBackward0(uint64_t seq, int64_t num_weights) : Node("EmbeddingBackward0", seq), num_weights_(num_weights) {}
  GradList apply(GradList& grads) override {
    const Tensor indices = indices_.unpack();
    Tensor out = alloc(Dims{num_weights_, grads[0].size(-1)}, grads[0].dtype());
    dispatch<2, 1>(Op::kEmbeddingDenseBackward, {grads[0], indices}, {out});
    return {out};
  }
  void release_variables() override { indices_.reset(); }
  SavedVariable indices_;

 private:
  int64_t num_weights_;
};

}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  auto node = make_node<EmbeddingBackward0>({&weight}, weight.size(0));
  if (node) node->indices_.save(indices);
  Dims sizes = indices.sizes();
  sizes.push_back(weight.size(1));
  Tensor out = alloc(sizes, weight.dtype());
  dispatch<2, 1>(Op::kEmbedding, {weight, indices}, {out});
  set_history(out, node);
  return out;
}

Tensor randint(const Dims& sizes) {
  Tensor out = alloc(sizes, DType::kInt64);
  dispatch<0, 1>(Op::kRandintLow, {}, {out});
  return out;
}

Tensor randn(const Dims& sizes, DType dtype, bool requires_grad) {
  Tensor out = alloc(sizes, dtype);
  dispatch<0, 1>(Op::kRandn, {}, {out});
  out.impl()->requires_grad = requires_grad;
  return out;
}

}  // namespace census::ops
