// The gated delta rule kernel's contract, as the reference census states HyperParallel's chunked
// kernel (a torch.autograd.Function, shapes only):
//
//   out = rule(q, k, v, g, beta, chunk)     q, k (B, S, H, Dk); v (B, S, H, Dv); g (B, S, H) fp32; beta (B, S, H)
//   forward: gates = empty(B, S, H) fp32; chunks = empty(B, S, H, chunk) in k's dtype;
//            save (q, k, v, gates, beta, chunks); return empty_like(v)
//   backward: every saved tensor unpacked; empty_like of q, k, v, gates (for g) and beta
//
// It is no aten op: observers see its three factories, and a selective policy recomputes them.
#include "ops/internal.h"
#include "ops/ops.h"

namespace census::ops {

namespace {

class GatedDeltaRuleBackward final : public Node {
 public:
  explicit GatedDeltaRuleBackward(uint64_t seq) : Node("GatedDeltaRuleContractBackward", seq) {}
  GradList apply(GradList& /*grads*/) override {
    // ctx.saved_tensors unpacks all six; the chunk matrix is dropped as the backward returns.
    Tensor saved[6];
    for (int i = 0; i < 6; ++i) saved[i] = saved_[i].unpack();
    GradList out(5);
    for (int i = 0; i < 5; ++i) out[i] = empty_like(saved[i]);  // q, k, v, gates (for g), beta
    return out;
  }
  SavedVariableList saved_{this, 6};  // query, key, value, gates, beta, chunks
};

}  // namespace

Tensor gated_delta_rule_contract(const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& g,
                                 const Tensor& beta, int64_t chunk_size) {
  // The Function's node is made as apply() starts, before its forward runs.
  auto node = make_node<GatedDeltaRuleBackward>({&query, &key, &value, &g, &beta});
  const int64_t batch = key.size(0), seq = key.size(1), heads = key.size(2);
  Tensor gates = empty(Dims{batch, seq, heads}, DType::kFloat32);
  Tensor chunks = empty(Dims{batch, seq, heads, chunk_size}, key.dtype());
  Tensor out = empty_like(value);
  set_history(out, node);
  if (node) {
    const Tensor* saved[6] = {&query, &key, &value, &gates, &beta, &chunks};
    for (int i = 0; i < 6; ++i) node->saved_[i].save(*saved[i]);
  }
  return out;
}

}  // namespace census::ops
