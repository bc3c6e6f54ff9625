// Batched matrix products: bmm, and matmul of two tensors of three or more dims as ATen's _matmul_impl
// runs it (expand both to the broadcast batch, fold the batch into one dim, bmm, _unsafe_view back).
// The chunked gated delta rule multiplies (B, H, C, 64, D) blocks this way.
#include <cassert>

#include "ops/internal.h"
#include "ops/ops.h"

namespace census::ops {
using internal::alloc;
using internal::dispatch;

namespace {

// bmm(Tensor self, Tensor mat2)
//   self: grad.bmm(mat2.transpose(1, 2).conj())   -> saves mat2 iff self needs grad
//   mat2: self.transpose(1, 2).conj().bmm(grad)   -> saves self iff mat2 needs grad
// mat2's gradient first, as MmBackward0 (Note [MmBackward0 order]).
class BmmBackward0 final : public Node {
 public:
  explicit BmmBackward0(uint64_t seq) : Node("BmmBackward0", seq) {}
  GradList apply(GradList& grads) override {
    const Tensor self = self_.unpack();
    const Tensor mat2 = mat2_.unpack();
    GradList out(2);
    if (should_compute_output(1)) out[1] = bmm(transpose(self, 1, 2), grads[0]);
    if (should_compute_output(0)) out[0] = bmm(grads[0], transpose(mat2, 1, 2));
    return out;
  }
  SavedVariable self_{this};
  SavedVariable mat2_{this};
};

Dims batch_of(const Tensor& t) {
  Dims batch;
  for (int i = 0; i + 2 < t.dim(); ++i) batch.push_back(t.size(i));
  return batch;
}

}  // namespace

Tensor bmm(const Tensor& self, const Tensor& mat2) {
  assert(self.dim() == 3 && mat2.dim() == 3 && self.size(2) == mat2.size(1));
  auto node = make_node<BmmBackward0>({&self, &mat2});
  if (node) {
    if (node->should_compute_output(0)) node->mat2_.save(mat2);
    if (node->should_compute_output(1)) node->self_.save(self);
  }
  const std::array<Tensor, 2> inputs{self, mat2};
  Tensor out = internal::run_op(Op::kBmm, inputs, [&] {
    return alloc(Dims{self.size(0), self.size(1), mat2.size(2)}, promote(self.dtype(), mat2.dtype()));
  });
  set_history(out, node);
  return out;
}

// _matmul_impl's batched branch (neither side folds into a matrix: both have 3+ dims).
Tensor batched_matmul(const Tensor& self, const Tensor& other) {
  const Dims batch = internal::broadcast_sizes(batch_of(self), batch_of(other));
  const int64_t n = self.size(-2), m = self.size(-1), p = other.size(-1);
  Dims self_sizes = batch, other_sizes = batch, out_sizes = batch;
  self_sizes.push_back(n);
  self_sizes.push_back(m);
  other_sizes.push_back(other.size(-2));
  other_sizes.push_back(p);
  out_sizes.push_back(n);
  out_sizes.push_back(p);
  const int64_t folded = batch.product();
  Tensor left = reshape(expand(self, self_sizes), Dims{folded, n, m});
  Tensor right = reshape(expand(other, other_sizes), Dims{folded, other.size(-2), p});
  return unsafe_view(bmm(left, right), out_sizes);
}

}  // namespace census::ops
