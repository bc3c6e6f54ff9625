// Vocabulary parallelism on the rank's shard, as DTensor runs it: RowwiseParallel's embedding over the
// rank's rows of the table (_MaskPartial: the ids outside them masked), and loss_parallel's
// log_softmax and nll_loss handlers (torch/distributed/tensor/parallel/loss.py) on logits sharded over
// the vocabulary. Their autograd is DTensor's: one node per aten op at the DTensor level; the local ops
// a handler runs have none. Each local op below is one the handler runs, in its order, with its
// temporaries dropped where its Python locals are rebound or its frame returns.
#include "ops/internal.h"
#include "ops/ops.h"

namespace census::ops {

using internal::alloc;
using internal::dispatch;

namespace {

// A local op of a DTensor handler: its output allocated, no node.
Tensor local_op(Op op, const Tensor& input, const Dims& sizes, DType dtype) {
  Tensor out = alloc(sizes, dtype);
  dispatch<1, 1>(op, {input}, {out});
  return out;
}

Tensor binary_op(Op op, const Tensor& a, const Tensor& b, const Dims& sizes, DType dtype) {
  Tensor out = alloc(sizes, dtype);
  dispatch<2, 1>(op, {a, b}, {out});
  return out;
}

// _MaskPartial._partition_value on int64 indices: the ids outside the rank's range and the ids
// shifted into it, the outside ones set to 0 (index_put_ with a fresh 0 scalar).
struct Masked {
  Tensor mask;     // bool
  Tensor indices;  // int64, the rank's row of each id
};
Masked mask_partition(const Tensor& ids) {
  Masked m;
  {
    const Tensor below = local_op(Op::kLtScalar, ids, ids.sizes(), DType::kBool);
    const Tensor above = local_op(Op::kGeScalar, ids, ids.sizes(), DType::kBool);
    m.mask = binary_op(Op::kOrTensor, below, above, ids.sizes(), DType::kBool);
  }
  {
    const Tensor copy = local_op(Op::kClone, ids, ids.sizes(), ids.dtype());
    m.indices = local_op(Op::kSub, copy, ids.sizes(), ids.dtype());
  }
  Tensor zero = local_op(Op::kLiftFresh, ids, Dims{}, ids.dtype());
  dispatch<3, 1>(Op::kIndexPutInplace, {m.indices, m.mask, zero}, {m.indices});
  return m;
}

// embedding(weight (V/T, H) Shard(0), ids) at the DTensor level: its backward is embedding_dense_backward
// of the whole vocabulary (the weight's gradient comes back replicated, the full table on every rank).
class VocabParallelEmbeddingBackward final : public Node {
 public:
  VocabParallelEmbeddingBackward(uint64_t seq, int64_t vocab_size)
      : Node("EmbeddingBackward0", seq), vocab_size_(vocab_size) {}
  GradList apply(GradList& grads) override {
    const Tensor ids = ids_.unpack();
    GradList out(2);
    if (should_compute_output(0)) {
      out[0] = alloc(Dims{vocab_size_, grads[0].size(-1)}, grads[0].dtype());
      dispatch<2, 1>(Op::kEmbeddingDenseBackward, {grads[0], ids}, {out[0]});
    }
    return out;
  }
  SavedVariable ids_{this};

 private:
  int64_t vocab_size_;
};

// _log_softmax_handler's result is saved; its backward handler hands the gradient on as it comes (the
// NLL's backward already made the log-softmax's).
class VocabParallelLogSoftmaxBackward final : public Node {
 public:
  explicit VocabParallelLogSoftmaxBackward(uint64_t seq) : Node("LogSoftmaxBackward0", seq) {}
  GradList apply(GradList& grads) override { return {grads[0]}; }
  SavedVariable result_{this};
};

// _nll_loss_backward_handler: _nll_loss_and_log_softmax_backward on the rank's shard.
class VocabParallelNllLossBackward final : public Node {
 public:
  explicit VocabParallelNllLossBackward(uint64_t seq) : Node("NllLossBackward0", seq) {}
  GradList apply(GradList& grads) override {
    const Tensor x = self_.unpack();  // (N, V / T) fp32 log-probabilities
    const Tensor target = target_.unpack();
    const Tensor total_weight = total_weight_.unpack();
    const int64_t n = x.size(0);
    // The handler's locals, declared in the reverse of the order its frame drops them at its return:
    // the arange, 1 - mask, the masked target, the mask, grad_input, the safe target, the weight.
    Tensor weight, safe_target, grad_input;
    Masked m;
    Tensor not_masked, rows;
    Tensor grad_output = binary_op(Op::kDivTensor, grads[0], total_weight, Dims{}, grads[0].dtype());
    {  // torch.where(target != ignore_index, target, 0) of target.unsqueeze(1)
      const Tensor keep = local_op(Op::kNeScalar, target, Dims{n, 1}, DType::kBool);
      safe_target = local_op(Op::kWhereScalarOther, keep, Dims{n, 1}, target.dtype());
    }
    grad_input = local_op(Op::kZerosLike, x, x.sizes(), x.dtype());
    m = mask_partition(squeeze(safe_target, 1));
    {  // 1 - mask.float()
      const Tensor mask_float = local_op(Op::kToDtype, m.mask, Dims{n}, x.dtype());
      not_masked = local_op(Op::kSub, mask_float, Dims{n}, x.dtype());
    }
    rows = local_op(Op::kArange, target, Dims{n}, DType::kInt64);
    {  // torch.where(target != ignore_index, grad_output, 0)
      const Tensor keep = local_op(Op::kNeScalar, target, Dims{n, 1}, DType::kBool);
      weight = local_op(Op::kWhereScalarOther, keep, Dims{n, 1}, x.dtype());
    }
    grad_output = Tensor();
    dispatch<3, 1>(Op::kIndexPutInplace, {grad_input, rows, not_masked}, {grad_input});  // grad_input[rows, t] -= 1
    Tensor sum;
    {
      const Tensor softmax = local_op(Op::kExp, x, x.sizes(), x.dtype());
      sum = binary_op(Op::kAddTensor, grad_input, softmax, x.sizes(), x.dtype());
    }
    Tensor result = binary_op(Op::kMulTensor, sum, weight, x.sizes(), x.dtype());
    sum = Tensor();
    return {result};
  }
  SavedVariable self_{this};
  SavedVariable target_{this};
  SavedVariable total_weight_{this};
};

}  // namespace

Tensor vocab_parallel_embedding(const Tensor& weight, const Tensor& ids, int64_t vocab_size, int64_t /*group_size*/) {
  auto node = make_node<VocabParallelEmbeddingBackward>({&weight}, vocab_size);
  if (node) {
    node->ids_.save(ids);
    node->next_edges()[0].sizes = Dims{vocab_size, weight.size(1)};  // the gradient is the whole table
  }
  Tensor out;
  {
    Masked m = mask_partition(ids);
    Dims sizes = ids.sizes();
    sizes.push_back(weight.size(1));
    out = binary_op(Op::kEmbedding, weight, m.indices, sizes, weight.dtype());
    m.indices = Tensor();
    // output[mask] = 0.0 (_MaskPartial._reduce_value), with a fresh 0 scalar of the output's dtype
    Tensor zero = local_op(Op::kLiftFresh, out, Dims{}, out.dtype());
    dispatch<3, 1>(Op::kIndexPutInplace, {out, m.mask, zero}, {out});
  }
  set_history(out, node);
  return out;
}

Tensor vocab_parallel_log_softmax(const Tensor& self, int64_t group_size) {
  auto node = make_node<VocabParallelLogSoftmaxBackward>({&self});
  const int64_t n = self.size(0);
  Tensor result;
  {
    NoGradGuard no_grad;
    Tensor x_max = local_op(Op::kAmax, self, Dims{n, 1}, self.dtype());
    x_max = wait_tensor(all_reduce(x_max, group_size));  // MAX
    Tensor shifted = binary_op(Op::kSub, self, x_max, self.sizes(), self.dtype());
    Tensor sumexp;
    {
      const Tensor e = local_op(Op::kExp, shifted, self.sizes(), self.dtype());
      sumexp = local_op(Op::kSumDimIntList, e, Dims{n, 1}, self.dtype());
    }
    sumexp = wait_tensor(all_reduce(sumexp, group_size));
    Tensor logsumexp = local_op(Op::kLog, sumexp, Dims{n, 1}, self.dtype());
    result = binary_op(Op::kSub, shifted, logsumexp, self.sizes(), self.dtype());
    // The frame's locals go: the log, the summed exponentials, the max, then the shifted logits.
    logsumexp = Tensor();
    sumexp = Tensor();
    x_max = Tensor();
  }
  if (node) node->result_.save(result);
  set_history(result, node);
  return result;
}

Tensor vocab_parallel_nll_loss(const Tensor& log_probs, const Tensor& target, int64_t group_size) {
  auto node = make_node<VocabParallelNllLossBackward>({&log_probs});
  const int64_t n = log_probs.size(0);
  Tensor loss, total_weight;
  {
    NoGradGuard no_grad;
    Tensor safe_target;  // torch.where(target != ignore_index, target, 0)
    {
      const Tensor keep = local_op(Op::kNeScalar, target, Dims{n}, DType::kBool);
      safe_target = local_op(Op::kWhereScalarOther, keep, Dims{n}, target.dtype());
    }
    // x.gather(1, safe_target.unsqueeze(1)) on the rank's columns: the target masked into them, the
    // entries of other ranks' columns zeroed, then summed over the ranks.
    Masked m = mask_partition(unsqueeze(safe_target, 1));
    Tensor gathered = binary_op(Op::kGather, log_probs, m.indices, Dims{n, 1}, log_probs.dtype());
    {
      const Tensor zero = local_op(Op::kLiftFresh, gathered, Dims{}, gathered.dtype());
      dispatch<3, 1>(Op::kIndexPutInplace, {gathered, m.mask, zero}, {gathered});
    }
    m.mask = Tensor();
    const Tensor reduced = wait_tensor(all_reduce(gathered, group_size));
    Tensor result = local_op(Op::kNeg, reduced, Dims{n}, log_probs.dtype());  // -x.squeeze(1)
    {
      const Tensor keep = local_op(Op::kNeScalar, target, Dims{n}, DType::kBool);
      result = local_op(Op::kWhereScalarOther, keep, Dims{n}, log_probs.dtype());
    }
    {
      // total_weight = (target != ignore_index).sum().to(x)
      Tensor count;
      {
        const Tensor keep = local_op(Op::kNeScalar, target, Dims{n}, DType::kBool);
        count = local_op(Op::kSum, keep, Dims{}, DType::kInt64);
      }
      total_weight = local_op(Op::kToDevice, count, Dims{}, log_probs.dtype());
    }
    {
      const Tensor sum = local_op(Op::kSum, result, Dims{}, log_probs.dtype());
      loss = binary_op(Op::kDivTensor, sum, total_weight, Dims{}, log_probs.dtype());
    }
    // The frame's locals go: result, gathered, reduced, the masked target, safe_target.
    result = Tensor();
    gathered = Tensor();
  }
  if (node) {
    node->self_.save(log_probs);
    node->target_.save(target);
    node->total_weight_.save(total_weight);
  }
  set_history(loss, node);
  return loss;
}

}  // namespace census::ops
