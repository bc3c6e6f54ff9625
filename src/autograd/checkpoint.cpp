#include "autograd/checkpoint.h"

#include "ops/dispatch.h"

namespace census {

// Note [Selective checkpointing] The policy is asked for every op the region dispatches, in each
// phase; the matmul count restarts with the recompute, so the recompute's decisions repeat the
// forward's and pop the cache in the order it was filled.
bool SelectivePolicy::saves(Op op, bool recompute) {
  switch (op) {
    case Op::kMm:
    case Op::kGroupedMm:
      return ++matmuls_[recompute ? 1 : 0] % 2 == 1;
    case Op::kAddmm:
    case Op::kBmm:
    case Op::kConvolution:
    case Op::kFlashAttention:
    case Op::kCudaFlashAttention:
    case Op::kNpuFusionAttention:
      return true;
    default:
      return false;
  }
}

void CheckpointFrame::recompute() {
  recomputed.assign(static_cast<size_t>(holders), Tensor());
  recomputed_count = 0;
  Session& session = Session::current();
  const bool grad_was = session.grad_enabled();
  session.set_grad_enabled(true);  // the recompute runs under enable_grad
  CheckpointFrame* previous = session.checkpoint();
  session.set_checkpoint(this);
  phase = Phase::kRecompute;
  try {
    recompute_fn();
  } catch (const StopRecomputation&) {
    // Early stop: everything the backward needs is packed; the rest of the forward is not re-run.
  }
  session.set_checkpoint(previous);
  session.set_grad_enabled(grad_was);
  recomputed_done = true;
}

namespace {

Tensor run_checkpointed(const std::function<Tensor(const Tensor&)>& forward, const Tensor& input, bool selective,
                        RecomputeLedger* ledger, const std::vector<int64_t>* attention_parameters,
                        std::vector<CachedOutput>* cached_log) {
  Session& session = Session::current();
  Ref<CheckpointFrame> frame = arena_shared<CheckpointFrame>();
  frame->selective = selective;
  // _NoopSaveInputs: the region's input is saved outside the region's hooks.
  session.notify_save(input);
  frame->input = input;
  frame->ledger = ledger;
  frame->attention_parameters = attention_parameters;
  frame->cached_log = cached_log;
  CheckpointFrame* raw = frame.get();
  frame->recompute_fn = [raw, forward] { forward(raw->input); };
  CheckpointFrame* previous = session.checkpoint();
  session.set_checkpoint(raw, frame);
  Tensor out = forward(input);
  session.set_checkpoint(previous);
  return out;
}

}  // namespace

Tensor checkpoint(const std::function<Tensor(const Tensor&)>& forward, const Tensor& input,
                  RecomputeLedger* ledger, const std::vector<int64_t>* attention_parameters,
                  std::vector<CachedOutput>* cached_log) {
  return run_checkpointed(forward, input, /*selective=*/true, ledger, attention_parameters, cached_log);
}

Tensor checkpoint_full(const std::function<Tensor(const Tensor&)>& forward, const Tensor& input) {
  return run_checkpointed(forward, input, /*selective=*/false, nullptr, nullptr, nullptr);
}

}  // namespace census
