// File: offload_activations.h
// Activation offloading as TRL's SFT trainer runs it (SFTConfig.activation_offloading): the
// saved-tensor hooks of OffloadActivations, read from huggingface/trl f2cd577
// (trl/models/activation_offloading.py), with its defaults (use_pin_memory, use_streams,
// min_offload_size=1024, max_fwd_stash_size=5), and its NoOpManager around the LM head. torchtune's
// recipes run the class TRL's was copied from (pytorch/torchtune bd2a0fc,
// torchtune/training/_activation_offloading.py), which differs where each rule says so below.
//
// Pack (each tensor a node saves while the context is entered; every one takes the next tensor id):
//   - its storage key (storage, storage offset, dtype) is one an earlier pack tracks: kept on the
//     device, the key now tracked for this id (torchtune: no keys);
//   - under 1 KiB (the view's numel x element size), or a parameter or a view of one: kept (torchtune:
//     a parameter itself, not a view of one);
//   - otherwise offloaded. First every stashed activation 5 or more ids older is let go (its key with
//     it). A view with a zero stride copies its whole storage to the host; a non-contiguous view is made
//     contiguous and a view at an offset is cloned first (a device copy either way), and the copy goes to
//     a pinned host tensor. The device tensor (the copy, where one was made) stays in the forward stash
//     and its key is tracked. (torchtune: no copy first; the host tensor is empty_like's, the view's
//     elements in its strides where it is dense.)
// Unpack (in the backward; a kept tensor is handed back as it is):
//   - an offloaded one still in the forward stash is handed back from there;
//   - otherwise the host tensor is copied back to the device (its _to_copy, viewed as it was saved)
//     and held in the backward stash;
//   - either way a post-hook goes on the running node: once it has run, the forward stash is let go,
//     and where this unpack was the node's first of an offloaded tensor, so are the tensors the nodes
//     before it brought back. A brought-back tensor another tensor now shares storage with goes from
//     the stash at once (record_stream). The backward's final callback lets the rest go.
//   The tracker forgets the id at unpack: the host copy goes then.
// Streams only order the copies; the bytes each stream holds are the caching allocator's to pool.
//
// TRL's trainer enters the context around each micro-batch's forward, loss and backward, clearing the
// tracker and the stashes as it enters and the stashes as it leaves. torchtune's recipe enters it around
// the model's forward alone (the loss and the backward run outside it) and clears nothing.
//
// Non-reentrant checkpointing composes with it: a region's saves are the checkpoint's (its hooks are
// innermost), and only the region's inputs, which _NoopSaveInputs saves outside them, are packed here.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <map>
#include <unordered_map>
#include <vector>

#include "graph/saved_variable.h"
#include "tensor/tensor.h"

namespace census {

// The host memory the offloading holds: pinned tensors, each counted by its bytes; and the blocks
// PyTorch's caching host allocator (ATen's CachingHostAllocator) holds for them. It rounds each request
// up to a power of two, keeps a freed block for a later request of that size and gives none back (until
// empty_cache). A block freed by a copy's stream is reused once the copy is done; here all are done by
// the next forward, the only place host tensors are made.
struct HostMemory {
  int64_t live_bytes = 0;
  int64_t peak_bytes = 0;
  int64_t pinned_reserved_bytes = 0;  // the blocks made: the allocator's reserved_bytes
  int64_t offloaded_bytes = 0;      // copied to the host, over the step
  int64_t brought_back_bytes = 0;   // copied back to the device
};

// What the packs did, over the step.
struct OffloadCounts {
  int64_t packs = 0;
  int64_t offloaded = 0;
  int64_t deduplicated = 0;     // kept: their storage key was tracked
  int64_t kept_small = 0;       // kept: under 1 KiB
  int64_t kept_parameter = 0;   // kept: a parameter or a view of one
  int64_t copied_before_offload = 0;  // offloaded from a contiguous copy (non-contiguous, or at an offset)
  int64_t brought_back = 0;     // copied back to the device at unpack (the rest came from the forward stash)

  OffloadCounts& operator+=(const OffloadCounts& o) {
    packs += o.packs, offloaded += o.offloaded, deduplicated += o.deduplicated, kept_small += o.kept_small;
    kept_parameter += o.kept_parameter, copied_before_offload += o.copied_before_offload;
    brought_back += o.brought_back;
    return *this;
  }
  OffloadCounts operator-(const OffloadCounts& o) const {
    return {packs - o.packs, offloaded - o.offloaded, deduplicated - o.deduplicated, kept_small - o.kept_small,
            kept_parameter - o.kept_parameter, copied_before_offload - o.copied_before_offload,
            brought_back - o.brought_back};
  }
};

// Whose OffloadActivations runs, and so around what (census step --offload-activations trl|torchtune).
enum class OffloadPolicy : uint8_t { kTrl, kTorchtune };

class OffloadActivations final : public SavedTensorHooks {
 public:
  static constexpr int64_t kMinOffloadSize = 1024;
  static constexpr int64_t kMaxFwdStashSize = 5;

  explicit OffloadActivations(OffloadPolicy policy = OffloadPolicy::kTrl) : policy_(policy) {}

  // The context's __enter__ (installing the hooks as the innermost) and __exit__ (restoring those
  // before). TRL's trainer enters it around each training_step: one micro-batch's forward, loss and
  // backward.
  void enter();
  void exit();
  // The one entered on this thread, if any: the LM head's NoOpManager asks.
  static OffloadActivations* entered();
  // The model's forward has returned its output: torchtune's recipe leaves the context here, before the
  // loss (TRL's stays in). Called by the causal LM's output, whichever loss follows.
  static void model_output_made();
  // The micro-batch entered last has run its backward: what it packed and copied is counted as one
  // micro-batch's, and the tensors its backward never unpacked (a node that never ran) are counted too.
  void end_micro_batch();
  // A micro-batch alike the last one ended, replayed rather than run (step/step_bytes.h): its packs and
  // copies counted as that one's.
  void replayed();
  // Saves a backward left in the tracker, unpacked by no node (DeepSeek-V3's grouped router's): TRL's
  // next __enter__ forgets them; torchtune's next forward asserts that there are none.
  int64_t left_unpacked() const { return left_unpacked_; }

  Packed pack(const Tensor& tensor, Ref<SavedTensorHooks>& owner, int64_t& slot) override;
  Tensor unpack(int64_t slot) override;
  void release(int64_t slot) override;

  const HostMemory& host() const { return host_; }
  const OffloadCounts& counts() const { return counts_; }

 private:
  struct StorageKey {
    int64_t storage;
    int64_t offset;
    DType dtype;
    bool operator<(const StorageKey& other) const {
      if (storage != other.storage) return storage < other.storage;
      if (offset != other.offset) return offset < other.offset;
      return dtype < other.dtype;
    }
  };
  // A tracker entry: the device tensor itself, or what the host copy holds and how to view it back.
  struct Tracked {
    Tensor kept;
    bool offloaded = false;
    int64_t host_bytes = 0;
    Dims host_sizes;
    Dims sizes, strides;
    int64_t storage_offset = 0;
    DType dtype = DType::kBFloat16;
  };

  Packed pack_torchtune(const Tensor& activation, Ref<SavedTensorHooks>& owner, int64_t& slot);
  void track_storage_key(const StorageKey& key, int64_t tensor_id);
  void release_storage_key(int64_t tensor_id);
  void forget(std::map<int64_t, Tracked>::iterator entry);
  // A pinned host tensor of `bytes` made (empty_like's) or freed, in the caching host allocator's blocks.
  void host_alloc(int64_t bytes);
  void host_free(int64_t bytes);
  void after_node(int64_t tensor_id, bool brought_back, uint32_t storage_refs, const std::vector<int64_t>& prev_ids);

  OffloadPolicy policy_;
  bool is_entered_ = false;
  std::map<int64_t, Tracked> tracker_;
  int64_t tensor_id_ = 0;
  bool is_first_forward_call_ = true;
  bool is_first_backward_call_ = true;
  std::map<StorageKey, int64_t> storage_to_tensor_id_;
  std::unordered_map<int64_t, StorageKey> storage_key_by_tensor_id_;
  std::map<int64_t, Tensor> fwd_stash_;         // by tensor id, oldest first
  std::map<int64_t, Tensor> bwd_tensor_stash_;  // by tensor id
  int64_t curr_graph_id_ = -1;
  Ref<Node> curr_autograd_node_;  // held, as TRL's reference holds it: its address is not reused
  // A node may unpack a variable more than once; the first unpack decides, the variable's release forgets.
  std::unordered_map<int64_t, Tensor> unpacked_;
  SavedTensorHooks* previous_hooks_ = nullptr;
  HostMemory host_;
  // By block size 2^k: the blocks in use, and the blocks made (in use or cached).
  std::array<int64_t, 64> blocks_in_use_{}, blocks_made_{};
  OffloadCounts counts_;
  // At the last enter, and what the last micro-batch added between enter and exit.
  int64_t left_unpacked_ = 0;
  HostMemory host_at_enter_, host_added_;
  OffloadCounts counts_at_enter_, counts_added_;
};

// TRL's NoOpManager, entered by forward hooks on the LM head while offloading is on: the head's saves
// are kept as they are. Elsewhere it does nothing.
class NoOpManager {
 public:
  NoOpManager();
  ~NoOpManager();
  NoOpManager(const NoOpManager&) = delete;
  NoOpManager& operator=(const NoOpManager&) = delete;

 private:
  SavedTensorHooks* previous_ = nullptr;
  bool entered_ = false;
};

}  // namespace census
