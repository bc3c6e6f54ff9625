#include "autograd/offload_activations.h"

#include <algorithm>
#include <cassert>
#include <utility>

#include "autograd/engine.h"
#include "graph/context.h"
#include "graph/node.h"
#include "ops/dispatch.h"
#include "ops/ops.h"

namespace census {
namespace {

thread_local OffloadActivations* g_entered = nullptr;

bool has_broadcast(const Tensor& tensor) {
  return std::any_of(tensor.strides().begin(), tensor.strides().end(), [](int64_t s) { return s == 0; });
}

}  // namespace

OffloadActivations* OffloadActivations::entered() { return g_entered; }

void OffloadActivations::model_output_made() {
  if (g_entered != nullptr && g_entered->policy_ == OffloadPolicy::kTorchtune) g_entered->exit();
}

void OffloadActivations::enter() {
  if (policy_ == OffloadPolicy::kTrl) {
    // TRL's __enter__: a fresh tracker, ids from 1, the stashes empty.
    while (!tracker_.empty()) forget(tracker_.begin());
    storage_to_tensor_id_.clear();
    storage_key_by_tensor_id_.clear();
    tensor_id_ = 0;
    is_first_forward_call_ = true;
    is_first_backward_call_ = true;
    bwd_tensor_stash_.clear();
    fwd_stash_.clear();
  }
  is_entered_ = true;
  previous_hooks_ = GraphContext::current().set_hooks(this);
  g_entered = this;
  host_at_enter_ = host_;
  counts_at_enter_ = counts_;
}

void OffloadActivations::exit() {
  if (!is_entered_) return;  // torchtune's recipe left before the loss
  is_entered_ = false;
  if (policy_ == OffloadPolicy::kTrl) {
    // TRL's __exit__: the streams synchronized, the stashes let go; the tracker and the keys stay.
    bwd_tensor_stash_.clear();
    fwd_stash_.clear();
  }
  GraphContext::current().set_hooks(previous_hooks_);
  previous_hooks_ = nullptr;
  g_entered = nullptr;
}

void OffloadActivations::end_micro_batch() {
  left_unpacked_ = std::max(left_unpacked_, static_cast<int64_t>(tracker_.size()));
  host_added_.offloaded_bytes = host_.offloaded_bytes - host_at_enter_.offloaded_bytes;
  host_added_.brought_back_bytes = host_.brought_back_bytes - host_at_enter_.brought_back_bytes;
  counts_added_ = counts_ - counts_at_enter_;
}

void OffloadActivations::replayed() {
  host_.offloaded_bytes += host_added_.offloaded_bytes;
  host_.brought_back_bytes += host_added_.brought_back_bytes;
  counts_ += counts_added_;
}

void OffloadActivations::track_storage_key(const StorageKey& key, int64_t tensor_id) {
  storage_to_tensor_id_[key] = tensor_id;
  storage_key_by_tensor_id_.insert_or_assign(tensor_id, key);
}

void OffloadActivations::release_storage_key(int64_t tensor_id) {
  const auto it = storage_key_by_tensor_id_.find(tensor_id);
  if (it == storage_key_by_tensor_id_.end()) return;
  const auto tracked = storage_to_tensor_id_.find(it->second);
  if (tracked != storage_to_tensor_id_.end() && tracked->second == tensor_id) storage_to_tensor_id_.erase(tracked);
  storage_key_by_tensor_id_.erase(it);
}

void OffloadActivations::forget(std::map<int64_t, Tracked>::iterator entry) {
  if (entry->second.offloaded) host_free(entry->second.host_bytes);
  tracker_.erase(entry);
}

void OffloadActivations::host_alloc(int64_t bytes) {
  host_.live_bytes += bytes;
  host_.peak_bytes = std::max(host_.peak_bytes, host_.live_bytes);
  host_.offloaded_bytes += bytes;
  // roundSize = PowerOf2Ceil(size), its free list indexed by Log2_64_Ceil(size).
  const auto k = static_cast<size_t>(std::bit_width(static_cast<uint64_t>(bytes) - 1));
  if (++blocks_in_use_[k] > blocks_made_[k]) {
    blocks_made_[k] = blocks_in_use_[k];
    host_.pinned_reserved_bytes += int64_t{1} << k;
  }
}

void OffloadActivations::host_free(int64_t bytes) {
  host_.live_bytes -= bytes;
  --blocks_in_use_[static_cast<size_t>(std::bit_width(static_cast<uint64_t>(bytes) - 1))];
}

SavedTensorHooks::Packed OffloadActivations::pack(const Tensor& activation, Ref<SavedTensorHooks>& owner,
                                                  int64_t& slot) {
  if (is_first_forward_call_) {
    // Both raise here where the tracker is not empty: TRL's __enter__ has emptied it, and where a
    // backward left torchtune's a save, the step is refused (left_unpacked).
    is_first_forward_call_ = false;
    is_first_backward_call_ = true;
    storage_to_tensor_id_.clear();
    storage_key_by_tensor_id_.clear();
  }
  if (policy_ == OffloadPolicy::kTorchtune) return pack_torchtune(activation, owner, slot);
  ++counts_.packs;
  const int64_t num_bytes = activation.nbytes();
  const int64_t tensor_id = ++tensor_id_;
  owner = Ref<SavedTensorHooks>(this);
  slot = tensor_id;
  const StorageKey storage_key{activation.storage_id(), activation.storage_offset(), activation.dtype()};
  Tracked& entry = tracker_[tensor_id];
  if (storage_to_tensor_id_.contains(storage_key)) {  // kept on the device, its key tracked by this id now
    entry.kept = activation;
    track_storage_key(storage_key, tensor_id);
    ++counts_.deduplicated;
    return Packed::kHeld;
  }
  if (num_bytes < kMinOffloadSize) {
    entry.kept = activation;
    ++counts_.kept_small;
    return Packed::kHeld;
  }
  if (activation.is_parameter()) {  // an nn.Parameter, or a view of one's storage (param_storages)
    entry.kept = activation;
    ++counts_.kept_parameter;
    return Packed::kHeld;
  }
  // The stashed activations 5 or more ids older go, oldest first, up to the first that is not.
  for (auto it = fwd_stash_.begin(); it != fwd_stash_.end() && it->first <= tensor_id - kMaxFwdStashSize;) {
    const int64_t id = it->first;
    it = fwd_stash_.erase(it);
    release_storage_key(id);
  }
  Tensor stashed = activation;
  entry.offloaded = true;
  entry.dtype = activation.dtype();
  if (has_broadcast(activation)) {
    // The whole storage goes, as a 1-D tensor of its elements; it comes back viewed as saved.
    const int64_t elements = activation.storage()->nbytes / activation.element_size();
    entry.host_sizes = Dims{elements};
    entry.host_bytes = elements * activation.element_size();
    entry.sizes = activation.sizes();
    entry.strides = activation.strides();
    entry.storage_offset = activation.storage_offset();
  } else {
    if (!activation.is_contiguous() || activation.storage_offset() != 0) {
      NoGradGuard no_grad;
      stashed = ops::clone_contiguous(activation);  // clone(contiguous_format), or contiguous(): a copy
      ++counts_.copied_before_offload;
    }
    entry.host_sizes = stashed.sizes();
    entry.host_bytes = stashed.nbytes();
    entry.sizes = stashed.sizes();
    entry.strides = stashed.strides();
    entry.storage_offset = 0;
  }
  ++counts_.offloaded;
  host_alloc(entry.host_bytes);
  fwd_stash_.emplace(tensor_id, std::move(stashed));
  track_storage_key(storage_key, tensor_id);
  return Packed::kHeld;
}

SavedTensorHooks::Packed OffloadActivations::pack_torchtune(const Tensor& activation, Ref<SavedTensorHooks>& owner,
                                                            int64_t& slot) {
  ++counts_.packs;
  const int64_t tensor_id = ++tensor_id_;
  owner = Ref<SavedTensorHooks>(this);
  slot = tensor_id;
  Tracked& entry = tracker_[tensor_id];
  if (activation.nbytes() < kMinOffloadSize) {
    entry.kept = activation;
    ++counts_.kept_small;
    return Packed::kHeld;
  }
  if (activation.is_parameter() && activation.is_leaf()) {  // an nn.Parameter itself; its views go
    entry.kept = activation;
    ++counts_.kept_parameter;
    return Packed::kHeld;
  }
  for (auto it = fwd_stash_.begin(); it != fwd_stash_.end() && it->first <= tensor_id - kMaxFwdStashSize;)
    it = fwd_stash_.erase(it);
  // torch.empty_like(activation, device="cpu"): the view's elements, in its strides where it is dense
  // (preserve_format), copied back to the device in the same strides.
  entry.offloaded = true;
  entry.dtype = activation.dtype();
  entry.sizes = activation.sizes();
  entry.strides = activation.is_non_overlapping_and_dense() ? activation.strides() : contiguous_strides(activation.sizes());
  entry.host_sizes = activation.sizes();
  entry.host_bytes = activation.nbytes();
  ++counts_.offloaded;
  host_alloc(entry.host_bytes);
  fwd_stash_.emplace(tensor_id, activation);
  return Packed::kHeld;
}

Tensor OffloadActivations::unpack(int64_t slot) {
  if (const auto done = unpacked_.find(slot); done != unpacked_.end()) return done->second;
  if (is_first_backward_call_) {
    curr_graph_id_ = current_graph_task_id();
    queue_callback([this] { bwd_tensor_stash_.clear(); });  // wait_and_del_remaining_references
    is_first_backward_call_ = false;
    if (policy_ == OffloadPolicy::kTorchtune) is_first_forward_call_ = true;
  }
  const auto entry = tracker_.find(slot);
  assert(entry != tracker_.end() && "an untracked tensor id");
  Tensor result;
  if (entry->second.offloaded) {
    const Tracked& tracked = entry->second;
    Node* node = current_autograd_node();
    assert(node != nullptr && "an offloaded tensor is unpacked by a running node");
    std::vector<int64_t> prev_node_ids;
    if (current_graph_task_id() == curr_graph_id_ && curr_autograd_node_.get() != node) {
      curr_autograd_node_ = Ref<Node>(node);
      for (const auto& [id, tensor] : bwd_tensor_stash_) prev_node_ids.push_back(id);
    }
    bool brought_back = true;
    uint32_t storage_refs = 0;
    if (const auto stashed = fwd_stash_.find(slot); stashed != fwd_stash_.end()) {
      result = stashed->second;
      brought_back = false;
    } else {
      result = ops::copy_from_host(tracked.host_sizes, tracked.dtype, tracked.sizes, tracked.strides,
                                   tracked.storage_offset);
      bwd_tensor_stash_.insert_or_assign(slot, result);
      storage_refs = result.storage()->ref_count();
      ++counts_.brought_back;
      host_.brought_back_bytes += tracked.host_bytes;
    }
    register_post_hook([this, slot, brought_back, storage_refs, prev_node_ids = std::move(prev_node_ids)] {
      after_node(slot, brought_back, storage_refs, prev_node_ids);
    });
  } else {
    result = entry->second.kept;
  }
  forget(entry);
  release_storage_key(slot);
  if (tracker_.empty() && policy_ == OffloadPolicy::kTrl) is_first_forward_call_ = true;
  unpacked_.emplace(slot, result);
  return result;
}

void OffloadActivations::after_node(int64_t tensor_id, bool brought_back, uint32_t storage_refs,
                                    const std::vector<int64_t>& prev_ids) {
  if (brought_back) {
    // Another tensor sharing the brought-back storage (the node's output aliasing it) keeps it; the
    // stash lets go now (record_stream).
    const auto it = bwd_tensor_stash_.find(tensor_id);
    if (it != bwd_tensor_stash_.end() && it->second.storage()->ref_count() > storage_refs) bwd_tensor_stash_.erase(it);
  }
  for (auto it = fwd_stash_.begin(); it != fwd_stash_.end();) {
    const int64_t id = it->first;
    it = fwd_stash_.erase(it);
    release_storage_key(id);
  }
  for (int64_t id : prev_ids) bwd_tensor_stash_.erase(id);
}

void OffloadActivations::release(int64_t slot) {
  // The variable is gone. An id it never unpacked stays in the tracker: until TRL's next __enter__;
  // torchtune's next forward asserts on it (left_unpacked).
  unpacked_.erase(slot);
}

NoOpManager::NoOpManager() {
  if (OffloadActivations::entered() == nullptr) return;
  previous_ = GraphContext::current().set_hooks(&Session::current());  // identity hooks: saves kept as they are
  entered_ = true;
}

NoOpManager::~NoOpManager() {
  if (entered_) GraphContext::current().set_hooks(previous_);
}

}  // namespace census
