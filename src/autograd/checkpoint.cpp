#include "autograd/checkpoint.h"

#include <stdexcept>
#include <string>

#include "autograd/engine.h"
#include "graph/context.h"
#include "graph/node.h"
#include "ops/autocast.h"

namespace census {

// Note [Selective checkpoint policy] The policy is asked for every op of the region that runs
// through the dispatch mode (Note [Ops through the dispatch mode]), in each phase; the alternating
// count restarts with the recompute, so the recompute's decisions repeat the forward's and pop the
// cache in the order it was filled.
bool SelectivePolicy::saves(Op op, bool recompute) {
  if (kind_ == Kind::kTorchtitanOp) {
    // _custom_policy: `meta[mm_count_key] += 1` before the test, a count a phase; every second mm recomputed.
    if (op == Op::kMm) return ++alternating_[recompute ? 1 : 0] % 2 == 1;
    return op == Op::kFlashAttention || op == Op::kCudaFlashAttention || op == Op::kReduceScatterTensor;
  }
  switch (op_def(op).sac) {
    case SacClass::kAlternate:
      return ++alternating_[recompute ? 1 : 0] % 2 == 1;
    case SacClass::kAlwaysSave:
      return true;
    case SacClass::kRecompute:
      return false;
  }
  return false;
}

ModeDecision CheckpointFrame::decide(const OpDef& def, std::span<const Tensor> /*inputs*/, std::span<Tensor> outputs) {
  const bool recompute = phase_ == Phase::kRecompute;
  if (stopped_) return ModeDecision::kRerun;  // after the early stop: no policy, no cache
  // Full checkpointing asks no policy: every op runs again in the recompute.
  if (!selective) return recompute ? ModeDecision::kRerun : ModeDecision::kRecompute;
  const bool saves = policy.saves(def.op, recompute);
  if (!recompute) return saves ? ModeDecision::kSave : ModeDecision::kRecompute;
  if (!saves) return ModeDecision::kRerun;
  // The entry leaves the cache: the recompute holds its tensors from now.
  std::vector<Tensor>& cached = cache_[def.op][cache_next_[def.op]++];
  for (size_t i = 0; i < outputs.size(); ++i) outputs[i] = std::move(cached[i]);
  return ModeDecision::kAnswered;
}

void CheckpointFrame::ran(const OpCall& call) {
  if (call.decision == ModeDecision::kNone && call.def.sac != SacClass::kRecompute)
    throw std::logic_error(std::string(call.def.name) + " ran in a checkpointed region without asking its dispatch mode");
  if (call.decision != ModeDecision::kSave) return;
  // Detached, as the caching mode stores them: the cache holds bytes, not the graph (a graph holding
  // its own cache through a holder would never be freed).
  std::vector<Tensor> outputs;
  for (const Tensor& output : call.outputs) outputs.push_back(output.detach());
  if (cached_log != nullptr) {
    const Session& session = Session::current();
    const std::string_view module = session.modules().empty() ? std::string_view() : session.modules().back().path;
    for (size_t i = 0; i < outputs.size(); ++i)
      cached_log->push_back({call.def.name, module, outputs[i].sizes(), outputs[i].dtype(), outputs[i].nbytes(), i == 0});
  }
  cache_[call.def.op].push_back(std::move(outputs));
}

SavedTensorHooks::Packed CheckpointFrame::pack(const Tensor& tensor, Ref<SavedTensorHooks>& owner, int64_t& slot) {
  if (phase_ == Phase::kForward) {
    // The checkpoint's pack hook: a holder, no tensor.
    owner = Ref<SavedTensorHooks>(this);  // a holder keeps the frame alive
    slot = holders_++;
    holder_gone_.push_back(0);
    return Packed::kHeld;
  }
  // The recompute's pack hook: the tensor goes to the frame, for the holder packed in this order, and
  // stays with the recompute's own node too (torch's hook returns it): the recompute's graph keeps its
  // saves as long as a tensor it made outlives the recompute (Gemma 4's shared_kv_states keeps the
  // re-run's keys and values, and through them their norms' saves, to the end of the backward).
  const auto holder = static_cast<size_t>(recomputed_count_++);
  if (!holder_gone_[holder]) recomputed_[holder] = tensor.detach();
  if (recomputed_count_ == holders_) stop_recomputation();
  return Packed::kKept;
}

Tensor CheckpointFrame::unpack(int64_t slot) {
  if (!recomputed_done_) recompute();
  // The frame lets go of it: the node unpacking it holds the only reference from now.
  return std::move(recomputed_[static_cast<size_t>(slot)]);
}

void CheckpointFrame::release_cycle() {
  session_ = nullptr;
  // Moved out before they go: letting go of them can free the last holder, and with it this frame.
  std::function<void()> recompute = std::move(recompute_fn);
  std::vector<Tensor> kept_inputs = std::move(inputs);
  std::vector<PackedInput> packed = std::move(packed_inputs);
  recompute_fn = nullptr;
}

void CheckpointFrame::release(int64_t slot) { holder_gone_[static_cast<size_t>(slot)] = 1; }

void CheckpointFrame::recompute() {
  recomputed_.assign(static_cast<size_t>(holders_), Tensor());
  recomputed_count_ = 0;
  phase_ = Phase::kRecompute;
  for (const PackedInput& packed : packed_inputs) {
    // SavedVariable::unpack: the hooks' tensor, as a new variable on the saved one's history, so that
    // the recompute's graph reaches the forward's (a saved leaf comes back as the hooks kept it).
    Tensor unpacked = packed.hooks->unpack(packed.slot);
    if (packed.grad_fn != nullptr) {
      unpacked = unpacked.detach();
      set_history(unpacked, packed.grad_fn, packed.output_nr);
    } else if (packed.grad_accumulator != nullptr) {
      // A leaf's: a variable that requires grad, its gradient the leaf's (the hooks' copy of an offloaded
      // input would otherwise come back as a tensor no gradient reaches). Its edges are made while the
      // recompute runs, while this frame holds the accumulator.
      unpacked = unpacked.detach();
      unpacked.impl()->requires_grad = true;
      unpacked.impl()->grad_accumulator = packed.grad_accumulator.get();
    }
    inputs[packed.index] = std::move(unpacked);
  }
  {
    GradModeGuard enable_grad(true);  // the recompute runs under enable_grad
    const AutocastScope autocast_state(autocast);
    run([&] { recompute_fn(); });
  }
  Session::current().set_muted(false);
  for (PackedInput& packed : packed_inputs) {  // the recompute's args go as it returns
    inputs[packed.index] = Tensor();
    packed.hooks->release(packed.slot);
  }
  packed_inputs.clear();
  stopped_ = false;
  recomputed_done_ = true;
}

// Early stop: everything the backward needs is packed. The rest of the forward is not re-run as far
// as anyone can see: it builds no graph and no observer hears of its ops or storages (what it frees
// of the recompute's own goes, as the recompute's locals would); it only lets the region's code
// return.
void CheckpointFrame::stop_recomputation() {
  stopped_ = true;
  GraphContext::current().set_grad_enabled(false);
  Session::current().set_muted(true);
}

namespace {

std::vector<Tensor> run_checkpointed(const RegionForward& forward, const std::vector<Tensor>& inputs, bool selective,
                                     std::vector<CachedOutput>* cached_log,
                                     SelectivePolicy::Kind kind = SelectivePolicy::Kind::kHyperParallel) {
  Ref<CheckpointFrame> frame = arena_shared<CheckpointFrame>();
  // _NoopSaveInputs: the region's inputs are saved outside the region's hooks, by those in force: the
  // session's keep them (and tell its observers); activation offloading's pack them.
  SavedTensorHooks& outer = GraphContext::current().hooks();
  for (size_t i = 0; i < inputs.size(); ++i) {
    Ref<SavedTensorHooks> hooks;
    int64_t slot = -1;
    if (outer.pack(inputs[i], hooks, slot) == SavedTensorHooks::Packed::kHeld) {
      frame->inputs.emplace_back();
      Ref<Node> accumulator;
      if (!inputs[i].grad_fn() && inputs[i].requires_grad()) accumulator = gradient_edge(inputs[i]).fn;
      frame->packed_inputs.push_back(
          {i, std::move(hooks), slot, inputs[i].grad_fn(), inputs[i].impl()->output_nr, std::move(accumulator)});
    } else {
      frame->inputs.push_back(inputs[i]);
    }
  }
  frame->cached_log = cached_log;
  frame->selective = selective;
  frame->policy = SelectivePolicy(kind);
  frame->autocast = autocast::is_enabled();
  CheckpointFrame* raw = frame.get();
  frame->recompute_fn = [raw, forward] { forward(raw->inputs); };
  return raw->run([&] { return forward(inputs); });
}

Tensor run_checkpointed(const std::function<Tensor(const Tensor&)>& forward, const Tensor& input, bool selective,
                        std::vector<CachedOutput>* cached_log,
                        SelectivePolicy::Kind kind = SelectivePolicy::Kind::kHyperParallel) {
  const RegionForward region = [forward](const std::vector<Tensor>& inputs) {  // kept by the frame's recompute
    return std::vector<Tensor>{forward(inputs[0])};
  };
  return run_checkpointed(region, std::vector<Tensor>{input}, selective, cached_log, kind)[0];
}

}  // namespace

Tensor checkpoint(const std::function<Tensor(const Tensor&)>& forward, const Tensor& input,
                  std::vector<CachedOutput>* cached_log) {
  return run_checkpointed(forward, input, /*selective=*/true, cached_log);
}

Tensor checkpoint_full(const std::function<Tensor(const Tensor&)>& forward, const Tensor& input) {
  return run_checkpointed(forward, input, /*selective=*/false, nullptr);
}

std::vector<Tensor> checkpoint_full(const RegionForward& forward, const std::vector<Tensor>& inputs) {
  return run_checkpointed(forward, inputs, /*selective=*/false, nullptr);
}

Tensor checkpoint_torchtitan_op(const std::function<Tensor(const Tensor&)>& forward, const Tensor& input) {
  return run_checkpointed(forward, input, /*selective=*/true, nullptr, SelectivePolicy::Kind::kTorchtitanOp);
}

namespace {

// Note [Reentrant checkpointing] torch/utils/checkpoint.py's CheckpointFunction:
//   forward   ctx.save_for_backward(*tensor_inputs) (the layer's hidden states; its other arguments are the
//             bound call's), then `with torch.no_grad(): outputs = run_function(*args)`: no node in the
//             region, nothing it saves; the Function's node is made before the forward runs (its
//             sequence number then), and is the output's grad_fn
//   backward  inputs = detach_variable(saved): a leaf on the saved storage requiring grad;
//             `with torch.enable_grad(): outputs = ctx.run_function(*detached_inputs)` (the whole forward
//             again, its temporaries freed as they die, its saves held by its graph);
//             torch.autograd.backward(outputs, args): a backward of its own over that graph, the
//             parameters' gradients made there and the leaf's .grad accumulated; the recomputed outputs
//             live until the Function's backward returns; its gradient is the leaf's .grad.
class CheckpointFunctionBackward final : public Node {
 public:
  CheckpointFunctionBackward(uint64_t seq, std::function<Tensor(const Tensor&)> forward)
      : Node("CheckpointFunctionBackward", seq), forward_(std::move(forward)), autocast_(autocast::is_enabled()) {}
  GradList apply(GradList& grads) override {
    Tensor detached = input_.unpack().detach();
    detached.impl()->requires_grad = true;
    Tensor outputs;
    {
      GradModeGuard enable_grad(true);
      const AutocastScope autocast_state(autocast_);  // the forward's autocast, closed before the backward
      outputs = forward_(detached);
    }
    if (outputs.grad_fn() != nullptr) run_backward(outputs, grads[0]);
    Tensor grad = detached.impl()->grad ? Tensor(detached.impl()->grad) : Tensor();
    return {grad};
  }
  SavedVariable input_{this};

 private:
  std::function<Tensor(const Tensor&)> forward_;
  bool autocast_;
};

}  // namespace

Tensor checkpoint_reentrant(const std::function<Tensor(const Tensor&)>& forward, const Tensor& input) {
  auto node = make_node<CheckpointFunctionBackward>({&input}, forward);
  Tensor out;
  {
    NoGradGuard no_grad;
    out = forward(input);
  }
  if (node) {
    node->input_.save(input, /*is_output=*/false);
    set_history(out, node);
  }
  return out;
}

Tensor checkpointed(Recompute mode, const std::function<Tensor(const Tensor&)>& forward, const Tensor& input) {
  switch (mode) {
    case Recompute::kSelective: return checkpoint(forward, input);
    case Recompute::kFull: return checkpoint_full(forward, input);
    case Recompute::kFullReentrant: return checkpoint_reentrant(forward, input);
    case Recompute::kTorchtitanOp: return checkpoint_torchtitan_op(forward, input);
    case Recompute::kNone: break;
  }
  return forward(input);
}

}  // namespace census
