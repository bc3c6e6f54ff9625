// The c10d functional collectives as one rank runs them, and the autograd.Function that FSDP2 hangs
// its backward hooks on. Shapes only: a collective allocates its output on the rank; what the other
// ranks send is never the rank's memory.
#include <array>

#include "ops/internal.h"
#include "ops/ops.h"

namespace census::ops {

using internal::alias;
using internal::alloc;
using internal::dispatch;

namespace {

Dims with_rows(const Tensor& self, int64_t rows) {
  Dims sizes = self.sizes();
  sizes[0] = rows;
  return sizes;
}

// _c10d_functional_autograd's all_gather_into_tensor: grad -> reduce_scatter_tensor(grad, "sum").
class AllGatherIntoTensorBackward final : public Node {
 public:
  AllGatherIntoTensorBackward(uint64_t seq, int64_t group_size) : Node("AllGatherIntoTensorBackward", seq), group_(group_size) {}
  GradList apply(GradList& grads) override { return {reduce_scatter_tensor(grads[0], group_)}; }

 private:
  int64_t group_;
};

class ReduceScatterTensorBackward final : public Node {
 public:
  ReduceScatterTensorBackward(uint64_t seq, int64_t group_size) : Node("ReduceScatterTensorBackward", seq), group_(group_size) {}
  GradList apply(GradList& grads) override { return {all_gather_into_tensor(grads[0], group_)}; }

 private:
  int64_t group_;
};

// Partial -> Replicate's backward (Replicate -> Partial) moves nothing: the gradient passes through.
class AllReduceBackward final : public Node {
 public:
  explicit AllReduceBackward(uint64_t seq) : Node("AllReduceBackward", seq) {}
  GradList apply(GradList& grads) override { return {grads[0]}; }
};

class AllToAllSingleBackward final : public Node {
 public:
  AllToAllSingleBackward(uint64_t seq, int64_t input_rows, int64_t group_size)
      : Node("AllToAllSingleBackward", seq), rows_(input_rows), group_(group_size) {}
  GradList apply(GradList& grads) override { return {all_to_all_single(grads[0], rows_, group_)}; }

 private:
  int64_t rows_, group_;
};

class BackwardHook final : public Node {
 public:
  BackwardHook(uint64_t seq, std::function<void()> on_backward) : Node("BackwardHookFunctionBackward", seq), hook_(std::move(on_backward)) {}
  GradList apply(GradList& grads) override {
    if (hook_) hook_();
    return {grads[0]};
  }

 private:
  std::function<void()> hook_;
};

// The rank's chunks of `self` along `dim` laid on dim 0: torch.cat(torch.chunk(self, n, dim), dim=0).
Tensor chunks_on_dim0(const Tensor& self, int64_t dim, int64_t group_size) {
  Dims sizes = self.sizes();
  sizes[static_cast<size_t>(dim)] /= group_size;
  sizes[0] *= group_size;
  Tensor out = alloc(sizes, self.dtype());
  dispatch<1, 1>(Op::kCat, {self}, {out});
  return out;
}

// Whether the chunks of dim 0 laid along `dim` are a view (_maybe_view_chunk_cat): every dim before
// `dim` of the gathered tensor's chunk has size 1.
bool chunk_cat_is_view(const Tensor& local, int64_t dim) {
  for (int64_t d = 0; d < dim; ++d)
    if (local.size(d) != 1) return false;
  return true;
}

// A redistribution's backward: the gradient redistributed back (DTensor's Redistribute.backward).
class RedistributeBackward final : public Node {
 public:
  using Back = Tensor (*)(const Tensor&, int64_t, int64_t);
  RedistributeBackward(uint64_t seq, Back back, int64_t dim, int64_t group_size)
      : Node("RedistributeBackward", seq), back_(back), dim_(dim), group_(group_size) {}
  GradList apply(GradList& grads) override { return {back_(grads[0], dim_, group_)}; }

 private:
  Back back_;
  int64_t dim_, group_;
};

class PartialGradBackward final : public Node {
 public:
  PartialGradBackward(uint64_t seq, int64_t group_size) : Node("FromLocalBackward", seq), group_(group_size) {}
  GradList apply(GradList& grads) override {
    NoGradGuard no_grad;
    return {all_reduce(grads[0], group_)};
  }

 private:
  int64_t group_;
};

Tensor collective(Op op, const Tensor& self, const Dims& sizes) {
  Tensor out = alloc(sizes, self.dtype());
  dispatch<1, 1>(op, {self}, {out});
  return out;
}

}  // namespace

Tensor all_gather_into_tensor(const Tensor& self, int64_t group_size) {
  auto node = make_node<AllGatherIntoTensorBackward>({&self}, group_size);
  Tensor out = collective(Op::kAllGatherIntoTensor, self, with_rows(self, self.size(0) * group_size));
  set_history(out, node);
  return out;
}

// Through the dispatch mode: torchtitan's selective policy saves a reduce-scatter's output
// (autograd/checkpoint.h), so its recompute takes it from the cache and runs no collective.
Tensor reduce_scatter_tensor(const Tensor& self, int64_t group_size) {
  auto node = make_node<ReduceScatterTensorBackward>({&self}, group_size);
  const std::array<Tensor, 1> inputs{self};
  Tensor out = internal::run_op(Op::kReduceScatterTensor, inputs,
                                [&] { return alloc(with_rows(self, self.size(0) / group_size), self.dtype()); });
  set_history(out, node);
  return out;
}

Tensor all_reduce(const Tensor& self, int64_t /*group_size*/) {
  auto node = make_node<AllReduceBackward>({&self});
  Tensor out = collective(Op::kAllReduce, self, self.sizes());
  set_history(out, node);
  return out;
}

Tensor all_to_all_single(const Tensor& self, int64_t output_rows, int64_t group_size) {
  auto node = make_node<AllToAllSingleBackward>({&self}, self.size(0), group_size);
  Tensor out = collective(Op::kAllToAllSingle, self, with_rows(self, output_rows));
  set_history(out, node);
  return out;
}

Tensor shard_to_replicate(const Tensor& local, int64_t dim, int64_t group_size) {
  auto node = make_node<RedistributeBackward>({&local}, &partial_to_shard, dim, group_size);
  Tensor gathered;
  {
    NoGradGuard no_grad;
    gathered = wait_tensor(all_gather_into_tensor(local, group_size));
  }
  Dims sizes = local.sizes();
  sizes[static_cast<size_t>(dim)] *= group_size;
  Tensor out;
  if (dim == 0 || chunk_cat_is_view(local, dim)) {
    out = alias(gathered, sizes, contiguous_strides(sizes));
  } else {
    out = alloc(sizes, local.dtype());
    dispatch<1, 1>(Op::kCat, {gathered}, {out});
  }
  set_history(out, node);
  return out;
}

Tensor partial_to_shard(const Tensor& partial, int64_t dim, int64_t group_size) {
  auto node = make_node<RedistributeBackward>({&partial}, &shard_to_replicate, dim, group_size);
  Tensor out;
  {
    NoGradGuard no_grad;
    Tensor laid = dim == 0 ? partial : chunks_on_dim0(partial, dim, group_size);
    out = wait_tensor(reduce_scatter_tensor(laid, group_size));
  }
  Dims sizes = partial.sizes();
  sizes[static_cast<size_t>(dim)] /= group_size;
  out = alias(out, sizes, contiguous_strides(sizes));
  set_history(out, node);
  return out;
}

Tensor partial_to_replicate(const Tensor& partial, int64_t group_size) {
  auto node = make_node<AllReduceBackward>({&partial});
  Tensor out;
  {
    NoGradGuard no_grad;
    out = wait_tensor(all_reduce(partial, group_size));
  }
  set_history(out, node);
  return out;
}

Tensor replicate_to_shard(const Tensor& full, int64_t dim, int64_t group_size) {
  auto node = make_node<RedistributeBackward>({&full}, &shard_to_replicate, dim, group_size);
  Dims sizes = full.sizes();
  sizes[static_cast<size_t>(dim)] /= group_size;
  Tensor out = alloc(sizes, full.dtype());  // the rank's chunk, copied out (_split_tensor's clone)
  dispatch<1, 1>(Op::kClone, {full}, {out});
  set_history(out, node);
  return out;
}

Tensor replicate_with_partial_grad(const Tensor& local, int64_t group_size) {
  auto node = make_node<PartialGradBackward>({&local}, group_size);
  if (!node) return local;
  Tensor out = alias(local, local.sizes(), local.strides());
  set_history(out, node);
  return out;
}

Tensor wait_tensor(const Tensor& self) {
  dispatch<1, 1>(Op::kWaitTensor, {self}, {self});
  return self;
}

int64_t collective_wire_bytes(Op op, int64_t bytes, int64_t group_size) {
  if (group_size <= 1) return 0;
  const int64_t share = bytes / group_size * (group_size - 1);
  switch (op) {
    case Op::kAllGatherIntoTensor:
    case Op::kReduceScatterTensor:
    case Op::kAllToAllSingle: return share;
    case Op::kAllReduce: return 2 * share;
    default: return 0;
  }
}

Tensor backward_hook(const Tensor& self, std::function<void()> on_backward) {
  auto node = make_node<BackwardHook>({&self}, std::move(on_backward));
  if (!node) return self;
  Tensor out = alias(self, self.sizes(), self.strides());
  set_history(out, node);
  return out;
}

}  // namespace census::ops
