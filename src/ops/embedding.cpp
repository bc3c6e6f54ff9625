// The token embedding and the whole-tensor sum. Above each node, the derivatives.yaml entry it follows.
#include "ops/embedding.h"

#include "ops/internal.h"
#include "ops/ops.h"

namespace census::ops {
using internal::alloc;
using internal::dispatch;

namespace {

// embedding(Tensor weight, Tensor indices, SymInt padding_idx=-1, bool scale_grad_by_freq=False, bool sparse=False)
//   indices: non_differentiable
//   weight: embedding_backward_symint(grad, indices, weight.sym_size(0), padding_idx, scale_grad_by_freq, sparse)
// -> keeps the indices; a dense embedding_backward is embedding_dense_backward, one (V, H) result.
class EmbeddingBackward0 final : public Node {
 public:
  EmbeddingBackward0(uint64_t seq, int64_t num_weights) : Node("EmbeddingBackward0", seq), num_weights_(num_weights) {}
  GradList apply(GradList& grads) override {
    const Tensor indices = indices_.unpack();
    GradList out(2);
    if (should_compute_output(0)) {
      out[0] = alloc(Dims{num_weights_, grads[0].size(-1)}, grads[0].dtype());
      dispatch<2, 1>(Op::kEmbeddingDenseBackward, {grads[0], indices}, {out[0]});
    }
    return out;
  }
  SavedVariable indices_{this};

 private:
  int64_t num_weights_;
};

// sum(Tensor self, *, ScalarType? dtype=None)  self: grad.expand_symint(self.sym_sizes())
class SumBackward0 final : public Node {
 public:
  SumBackward0(uint64_t seq, Dims sizes) : Node("SumBackward0", seq), sizes_(sizes) {}
  GradList apply(GradList& grads) override { return {expand(grads[0], sizes_)}; }

 private:
  Dims sizes_;
};

}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  auto node = make_node<EmbeddingBackward0>({&weight, &indices}, weight.size(0));
  if (node) node->indices_.save(indices);
  Dims sizes = indices.sizes();
  sizes.push_back(weight.size(1));
  Tensor out = alloc(sizes, weight.dtype());
  dispatch<2, 1>(Op::kEmbedding, {weight, indices}, {out});
  set_history(out, node);
  return out;
}

Tensor sum(const Tensor& self) {
  auto node = make_node<SumBackward0>({&self}, self.sizes());
  // A sum of booleans or integers is int64, as ATen promotes it.
  Tensor out = alloc(Dims{}, is_floating(self.dtype()) ? self.dtype() : DType::kInt64);
  dispatch<1, 1>(Op::kSum, {self}, {out});
  set_history(out, node);
  return out;
}

// The random inputs of a training step (torch.randint for the ids and labels, torch.randn for a
// pipeline stage's received tensors): factories, no node.
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
