#include "step/fsdp.h"

#include <algorithm>
#include <set>

#include "ops/ops.h"

namespace census {
namespace {

constexpr std::string_view kEmptyOp = "aten.empty.memory_format";
constexpr std::string_view kGrowOp = "UntypedStorage.resize_@fsdp_copy_out";
constexpr std::string_view kFreeOp = "UntypedStorage.resize_@other";

// An unsharded parameter's storage is its all-gather output's part (FSDP2's padded_unsharded_size): dim 0
// padded to a multiple of the shard degree, as every rank's shard is.
int64_t padded_unsharded_bytes(const Tensor& p, int64_t shards) {
  const int64_t rows = p.sizes()[0];
  if (rows == 0) return 0;
  return (rows + shards - 1) / shards * shards * (p.numel() / rows) * p.element_size();
}

}  // namespace

Fsdp2::Fsdp2(StepBytes& bytes, const FsdpPolicy& policy, const std::vector<const CausalLM*>& chunks)
    : bytes_(bytes), policy_(policy) {
  const int64_t n = policy_.shards;
  auto shard_of = [&](Unit& unit, const Tensor& p) {
    Dims sizes = p.sizes();
    sizes[0] = (sizes[0] + n - 1) / n;  // Shard(0), dim 0 padded to a multiple of N
    Tensor shard = make_parameter(sizes, p.impl()->name, policy_.sharded_dtype());
    if (policy_.cpu_offload) {  // padded_sharded_param.cpu().pin_memory()
      bytes_.place_on_host(shard);
      bytes_.note_pinned(shard);
    }
    unit.params.push_back(p);
    unit.shards.push_back(shard);
    unit.shard_numel += shard.numel();
  };
  const bool torchtitan = policy_.wrap == FsdpWrap::kTorchtitan;
  for (const CausalLM* model : chunks) {
    const size_t layers = model->layers().size();
    // The units of their own: the first chunk's embedding and the last's final norm with its head.
    const int64_t embedding = torchtitan && model->chunk().first ? static_cast<int64_t>(layers) : -1;
    const int64_t head = torchtitan && model->chunk().last ? static_cast<int64_t>(layers) + (embedding >= 0) : -1;
    std::vector<Unit> units(layers + (embedding >= 0) + (head >= 0) + 1);
    std::set<int64_t> in_units;
    auto own = [&](Unit& unit, const std::vector<Tensor>& params) {
      for (const Tensor& p : params) {
        shard_of(unit, p);
        in_units.insert(p.storage_id());
      }
    };
    for (size_t i = 0; i < layers; ++i) {
      own(units[i], model->layers()[i]->parameters());
      // torchtitan until v0.1: every layer but the last resharded after forward (its backward runs next);
      // v0.2: every layer.
      units[i].reshard_after_forward =
          policy_.reshard_after_forward == ReshardAfterForward::kAlways ||
          (policy_.reshard_after_forward == ReshardAfterForward::kDefault && (torchtitan || i + 1 < layers));
    }
    if (embedding >= 0) {
      own(units[static_cast<size_t>(embedding)], model->embedding_parameters());
      units[static_cast<size_t>(embedding)].reshard_after_forward =
          policy_.reshard_after_forward != ReshardAfterForward::kNever;
      units[static_cast<size_t>(embedding)].hooked = false;
    }
    if (head >= 0) {
      own(units[static_cast<size_t>(head)], model->final_norm_and_head_parameters());
      units[static_cast<size_t>(head)].reshard_after_forward = policy_.reshard_after_forward == ReshardAfterForward::kAlways;
      units[static_cast<size_t>(head)].hooked = false;
    }
    root_returned_.push_back(false);
    embedding_unit_.push_back(embedding);
    head_unit_.push_back(head);
    Unit& root = units.back();
    for (const Tensor& p : model->parameters())
      if (!in_units.contains(p.storage_id())) shard_of(root, p);
    root.reshard_after_forward = policy_.reshard_after_forward != ReshardAfterForward::kNever;
    // model.parameters() order: the embedding, the layers, the rest.
    std::vector<Tensor> order;
    for (const Tensor& p : model->parameters()) {
      for (const Unit& unit : units)
        for (size_t k = 0; k < unit.params.size(); ++k)
          if (unit.params[k].storage_id() == p.storage_id()) order.push_back(unit.shards[k]);
    }
    sharded_.insert(sharded_.end(), order.begin(), order.end());
    units_.push_back(std::move(units));
    begins_.push_back(model->chunk().begin);
  }
}

void Fsdp2::unshard(Unit& unit) {
  if (unit.all_gather_output.defined() || unit.unsharded || unit.params.empty()) return;
  // foreach_all_gather: the copy-in (the shards cast to the parameter dtype) where the shards are not
  // already bf16, the output the collective writes into (c10d's _allgather_base_ allocates nothing),
  // both under the all-gather copy-in stream.
  const StepStreamScope on(bytes_, StepStream::kAllGatherCopyIn);
  if (policy_.cpu_offload) return unshard_from_host(unit);
  Tensor copy_in;
  if (policy_.mixed_precision) {
    copy_in = ops::empty(Dims{unit.shard_numel}, DType::kBFloat16);
    bytes_.note(copy_in, StepCategory::kFsdpAllGatherBuffers);
  }
  unit.all_gather_output = ops::empty(Dims{policy_.shards * unit.shard_numel}, DType::kBFloat16);
  bytes_.note(unit.all_gather_output, StepCategory::kFsdpAllGatherBuffers);
}

void Fsdp2::unshard_from_host(Unit& unit) {
  // _get_param_all_gather_inputs: each shard's all_gather_inputs, its device copy (cast where the
  // parameter dtype differs, the copy freed as the property returns); then the output; the inputs live
  // until foreach_all_gather returns, its list freeing them from its end.
  NoGradGuard no_grad;
  std::vector<Tensor> inputs;
  for (const Tensor& shard : unit.shards) {
    Tensor input = ops::copy_across_devices(shard);
    bytes_.note_copy(input.nbytes(), /*to_host=*/false);
    bytes_.note(input, StepCategory::kFsdpAllGatherBuffers);
    if (policy_.mixed_precision) {
      input = ops::to(input, DType::kBFloat16);
      bytes_.note(input, StepCategory::kFsdpAllGatherBuffers);
    }
    inputs.push_back(std::move(input));
  }
  unit.all_gather_output = ops::empty(Dims{policy_.shards * unit.shard_numel}, DType::kBFloat16);
  bytes_.note(unit.all_gather_output, StepCategory::kFsdpAllGatherBuffers);
  while (!inputs.empty()) inputs.pop_back();
}

void Fsdp2::wait_for_unshard(Unit& unit, bool forward) {
  if (!unit.all_gather_output.defined()) return;
  // In forward the previous unit's all-gather output is freed once this copy-out is done (implicit
  // prefetch: the walrus-bound local outlives the new state's assignment).
  Tensor previous = forward ? std::move(all_gather_state_) : Tensor();
  for (const Tensor& p : unit.params) {
    const int64_t padded = padded_unsharded_bytes(p, policy_.shards);
    if (!unit.allocated) {
      bytes_.track(p, kEmptyOp, padded);
      bytes_.note(p, StepCategory::kFsdpUnshardedParams);
    } else {
      bytes_.resize(p, padded, kGrowOp);
    }
  }
  unit.allocated = unit.unsharded = true;
  if (forward)
    all_gather_state_ = std::move(unit.all_gather_output);
  unit.all_gather_output = Tensor();
}

void Fsdp2::reshard(Unit& unit) {
  if (!unit.unsharded) return;
  for (const Tensor& p : unit.params) bytes_.resize(p, 0, kFreeOp);
  unit.unsharded = false;
}

void Fsdp2::pre_forward(Unit& unit) {
  unshard(unit);
  wait_for_unshard(unit, /*forward=*/true);
}

void Fsdp2::post_forward(Unit& unit) {
  if (unit.reshard_after_forward) reshard(unit);
  unit.post_forward_indices.push_back(static_cast<int64_t>(post_forward_order_.size()));
  post_forward_order_.push_back(&unit);
}

void Fsdp2::pre_backward(Unit& unit) {
  unshard(unit);
  wait_for_unshard(unit, /*forward=*/false);
  // _backward_prefetch: the unit that ran its forward just before this one.
  if (unit.post_forward_indices.empty()) return;
  const int64_t index = unit.post_forward_indices.back();
  unit.post_forward_indices.pop_back();
  if (index > 0) unshard(*post_forward_order_[static_cast<size_t>(index - 1)]);
}

void Fsdp2::post_backward(Unit& unit) {
  // FSDP2 reduces the parameters whose unsharded .grad is set (fsdp_params_with_grad): one no
  // gradient reached keeps no sharded gradient, and its rows are in neither reduce-scatter buffer.
  std::vector<Tensor> grads;
  std::vector<size_t> with_grad;
  for (size_t i = 0; i < unit.params.size(); ++i) {
    const Tensor& p = unit.params[i];
    if (p.impl()->grad) {
      Tensor grad = p.grad();
      if (policy_.tensor_parallel > 1) {
        NoGradGuard no_grad;
        if (grad.numel() > p.numel())  // Replicate -> Shard(0): the rank's rows of the whole table
          grad = ops::clone_contiguous(ops::slice(grad, 0, 0, p.size(0)));
        else if (policy_.sequence_parallel && p.dim() == 1)  // Partial -> Replicate
          grad = ops::wait_tensor(ops::all_reduce(ops::view(grad, p.sizes()), policy_.tensor_parallel));
      }
      grads.push_back(std::move(grad));
      with_grad.push_back(i);
      bytes_.note(grads.back(), StepCategory::kFsdpUnshardedGrads);
      p.impl()->grad.reset();
    }
  }
  reshard(unit);
  while (!reduce_scatter_states_.empty()) reduce_scatter_states_.pop_front();  // one input kept in flight
  if (grads.empty()) return;
  NoGradGuard no_grad;
  int64_t shard_numel = 0;  // the reduced parameters' padded shards
  for (size_t i : with_grad) shard_numel += unit.shards[i].numel();
  Tensor input = ops::empty(Dims{policy_.shards * shard_numel}, policy_.reduce_dtype());
  bytes_.note(input, StepCategory::kFsdpReduceScatterBuffers);
  // The copy-in done, the list is cleared from its end; its last gradient is still held by the caller.
  const Tensor last = grads.back();
  while (!grads.empty()) grads.pop_back();
  // The reduce-scatter's input is made on the compute stream (its copy-in runs there), its output on
  // the reduce-scatter stream: the sharded gradients are blocks of that stream's pool.
  Tensor output;
  {
    const StepStreamScope on(bytes_, StepStream::kReduceScatter);
    output = ops::empty(Dims{shard_numel}, policy_.reduce_dtype());
  }
  const bool first = !unit.shards[with_grad.front()].impl()->grad;
  bytes_.note(output, first && !policy_.cpu_offload ? StepCategory::kGradients : StepCategory::kFsdpReduceScatterBuffers);
  int64_t offset = 0;
  for (size_t i : with_grad) {
    Tensor& shard = unit.shards[i];
    Tensor part = ops::view(ops::slice(output, 0, offset, offset + shard.numel()), shard.sizes());
    offset += shard.numel();
    if (policy_.cpu_offload) {  // new_sharded_grad.to("cpu"): pinned where it becomes the .grad
      const StepHostScope on_host(bytes_);
      part = ops::copy_across_devices(part);
      bytes_.note_copy(part.nbytes(), /*to_host=*/true);
      if (first) bytes_.note_pinned(part);
    }
    if (first) {
      shard.impl()->grad = part.impl_ptr();
    } else {
      Tensor grad = shard.grad();
      ops::add_(grad, part);  // grad._local_tensor += new_sharded_grad
    }
  }
  output = Tensor();
  reduce_scatter_states_.push_back(std::move(input));
}

Tensor Fsdp2::Layers::run(int64_t index, const Tensor& hidden_states, const LayerForward& forward) const {
  Unit& unit = fsdp_.units_[chunk_][static_cast<size_t>(index - fsdp_.begins_[chunk_])];
  fsdp_.pre_forward(unit);
  Fsdp2& fsdp = fsdp_;
  Tensor out;
  {
    const Tensor input = ops::backward_hook(hidden_states, [&fsdp, &unit] { fsdp.post_backward(unit); });
    out = inner_.run(index, input, forward);
  }
  fsdp_.post_forward(unit);
  return ops::backward_hook(out, [&fsdp, &unit] { fsdp.pre_backward(unit); });
}

Tensor Fsdp2::Layers::run_embedding(const Tensor& input_ids, const ModuleForward& embed) const {
  Unit* unit = fsdp_.unit_at(chunk_, fsdp_.embedding_unit_[chunk_]);
  if (unit == nullptr) return inner_.run_embedding(input_ids, embed);
  unit->hooked = true;
  fsdp_.pre_forward(*unit);  // its input, the ids, needs no gradient: no post-backward hook
  Tensor out = inner_.run_embedding(input_ids, embed);
  fsdp_.post_forward(*unit);
  Fsdp2& fsdp = fsdp_;
  return ops::backward_hook(out, [&fsdp, unit] { fsdp.pre_backward(*unit); });
}

Tensor Fsdp2::Layers::run_final_norm(const Tensor& hidden_states, const ModuleForward& norm) const {
  Unit* unit = fsdp_.unit_at(chunk_, fsdp_.head_unit_[chunk_]);
  if (unit == nullptr) return inner_.run_final_norm(hidden_states, norm);
  unit->hooked = true;
  fsdp_.pre_forward(*unit);  // fully_shard([norm, output]): unsharded at the norm's forward
  Fsdp2& fsdp = fsdp_;
  const Tensor input = ops::backward_hook(hidden_states, [&fsdp, unit] { fsdp.post_backward(*unit); });
  return inner_.run_final_norm(input, norm);
}

Tensor Fsdp2::Layers::head_output(const Tensor& logits) const {
  Unit* unit = fsdp_.unit_at(chunk_, fsdp_.head_unit_[chunk_]);
  if (unit == nullptr) return inner_.head_output(logits);
  fsdp_.post_forward(*unit);  // the group's post-forward, once its last module (the head) has run
  Fsdp2& fsdp = fsdp_;
  return ops::backward_hook(inner_.head_output(logits), [&fsdp, unit] { fsdp.pre_backward(*unit); });
}

bool Fsdp2::units_hooked() const {
  for (const std::vector<Unit>& units : units_)
    for (const Unit& unit : units)
      if (!unit.hooked) return false;
  return true;
}

void Fsdp2::Layers::model_returns(std::vector<Tensor>& outputs) const {
  inner_.model_returns(outputs);
  fsdp_.root_post_forward(chunk_);
  for (Tensor& output : outputs) output = fsdp_.root_output(chunk_, output);
  fsdp_.root_returned_[chunk_] = true;
}

// A root that holds no parameter (torchtitan's units) has no parameter group: FSDP2 runs none of its
// group's hooks, and it takes no place in the forward order that backward prefetch follows.
void Fsdp2::root_pre_forward(size_t chunk) {
  root_returned_[chunk] = false;
  if (!units_[chunk].back().params.empty()) pre_forward(units_[chunk].back());
}

void Fsdp2::root_post_forward(size_t chunk) {
  if (!units_[chunk].back().params.empty()) post_forward(units_[chunk].back());
  all_gather_state_ = Tensor();  // the last all-gather result, freed when the root's forward ends
}

Tensor Fsdp2::root_output(size_t chunk, const Tensor& output) {
  Unit& root = units_[chunk].back();
  if (root.params.empty()) return output;
  return ops::backward_hook(output, [this, &root] { pre_backward(root); });
}

void Fsdp2::end_of_backward(size_t chunk) {
  // _root_post_backward_final_callback: in the order the states were made (the root, the embedding, ...),
  // the post-backward of each unit still unsharded: the root's, and the embedding's, whose input needed no
  // gradient (a layer or the norm and head's ran when their input's gradient came).
  if (!units_[chunk].back().params.empty()) post_backward(units_[chunk].back());
  if (Unit* embedding = unit_at(chunk, embedding_unit_[chunk]); embedding != nullptr && embedding->unsharded)
    post_backward(*embedding);
  reduce_scatter_states_.clear();
  post_forward_order_.clear();
  for (std::vector<Unit>& units : units_)
    for (Unit& unit : units) unit.post_forward_indices.clear();
}

}  // namespace census
