// File: selective_reading.h
// The selective census's kept bytes read off a plain census's forward (census activations measures
// both on the same layer; the selective one's own forward was a third of its work).
//
//   SelectiveReading reading;
//   census_layer(config, layer, seq, /*explain=*/false, &reading);  // the plain census, reading too
//   int64_t kept = selective_kept(config, layer, seq, reading);     // its own run only where unread
//
// Note [Selective kept bytes from the plain forward] What a layer under the selective policy keeps
// once its forward returns (census_selective_kept) is every storage live then, its output and the
// shared positions left out: the input, the outputs of the ops the policy saves (the checkpoint's
// cache, Note [Selective checkpoint policy]), and whatever else the layer's tensors hold; none of
// what its nodes save, which the checkpoint's holders replace. The plain forward runs the same ops on
// the same shapes in the same order after the positions are embedded, so the reader asks the same
// policy of each op and adds up the storages the cache would hold, each as the forward's end would
// find it (an output born in a loop iteration standing for alike ones stands for all of theirs, Note
// [Alike iterations]). Storages made before the layer's forward (the input, buffers, the positions)
// count where an op hands them out, as the selective census's heap first sees them there.
//
// It answers only where the plain forward's end accounts for everything live: every storage still
// live is the input, the output, made before the forward, cached, or saved by a node (a storage held
// by anything else, a module's state, would be kept under the checkpoint too, unseen here). It also
// declines a cached output that is not a new storage. A storage both saved by a node and kept by a
// module would escape that check, so census_layer does not read a layer whose modules may keep
// tensors past the forward (a train.yaml's fused modules: GroupedExperts keeps its group list), nor
// one that takes arguments beyond its input and positions (DecoderLayer::has_lone_arguments). Then
// the caller runs the checkpointed forward itself.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "autograd/checkpoint.h"
#include "census/live_bytes.h"
#include "census/saved_tensors.h"
#include "census/selective_census.h"
#include "nn/rotary.h"

namespace census {

struct SelectiveReading {
  bool wants_shares = false;  // set by the caller: read the recompute shares too, where they can be
  bool read = false;          // false: the plain forward could not tell; run the checkpointed forward
  int64_t kept_bytes = 0;
  // census_recomputed's answer, where the config builds the layer as it prices it.
  std::optional<RecomputeShares> shares;
};

// Listens to the layer's forward (from just after its positions are embedded to its return) and then
// reads the selective census's kept bytes off the heap and the saves it ends with.
class SelectiveReader final : public Observer {
 public:
  // `ledger_parameters`: the attention parameters, where the shares are to be read (else null).
  explicit SelectiveReader(const std::vector<int64_t>* ledger_parameters);
  void on_op(const OpCall& call) override;

  // At the forward's end: the reading of a forward from `input`, with `positions`, to `output`, into
  // `reading` (its wants_shares as the caller set it).
  void read(const Tensor& input, const Tensor& output, const nn::PositionEmbeddings& positions, const LiveBytes& live,
            const SavedTensors& saved, SelectiveReading& reading) const;

 private:
  struct Cached {
    int64_t storage_id;
    int64_t bytes;  // at the forward's end under the checkpoint
  };
  int64_t first_new_id_;  // storages from this id on were made by the layer's forward
  int64_t newest_id_;     // the newest storage an op has handed out so far
  bool declined_ = false;
  SelectivePolicy policy_;
  std::optional<RecomputeLedger> ledger_;
  std::vector<Cached> cached_;
  StorageSet cached_ids_;
  StorageSet old_outputs_;  // storages made before the forward that an op handed out
};

}  // namespace census
