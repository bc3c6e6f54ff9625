#include "census/selective_reading.h"

#include <algorithm>

namespace census {

SelectiveReader::SelectiveReader(const std::vector<int64_t>* ledger_parameters)
    : Observer(kOnOp),
      first_new_id_(Session::current().storages_made()),
      newest_id_(first_new_id_ - 1) {
  if (ledger_parameters != nullptr) ledger_.emplace(*ledger_parameters);
}

void SelectiveReader::on_op(const OpCall& call) {
  const int64_t newest_before = newest_id_;
  for (const Tensor& output : call.outputs) {
    const Storage& storage = *output.storage();
    newest_id_ = std::max(newest_id_, storage.id);
    if (storage.id < first_new_id_ && !storage.is_parameter) old_outputs_.insert(storage.id);
  }
  // Only these ops ask the checkpoint's dispatch mode (Note [Ops through the dispatch mode]), and
  // every one of them must; the policy's alternating count is theirs.
  if (call.def.sac == SacClass::kRecompute) {
    // The ledger counts a matmul the mode was asked about; whether this one would be, no call says.
    declined_ = declined_ || (ledger_ && call.def.is_matmul());
    return;
  }
  const bool saves = policy_.saves(call.def.op, /*recompute=*/false);
  if (ledger_ && call.def.is_matmul()) ledger_->count(call, saves);
  if (!saves) return;
  const int64_t weight = Session::current().op_weight();
  for (const Tensor& output : call.outputs) {
    const Storage& storage = *output.storage();
    // A new storage, born in this op: else which iterations it stands for is not the op's to say.
    if (storage.id <= newest_before) {
      declined_ = true;
      return;
    }
    if (storage.is_parameter || storage.nbytes == 0 || cached_ids_.contains(storage.id)) continue;
    cached_ids_.insert(storage.id);
    cached_.push_back({storage.id, storage.nbytes * weight});
  }
}

void SelectiveReader::read(const Tensor& input, const Tensor& output, const nn::PositionEmbeddings& positions,
                           const LiveBytes& live, const SavedTensors& saved, SelectiveReading& reading) const {
  reading.read = false;
  if (declined_) return;
  // Left out of what the layer keeps, as the selective census leaves them out.
  StorageSet not_kept;
  not_kept.insert(output.storage_id());
  for (const Tensor* shared : {&positions.position_ids, &positions.cos, &positions.sin})
    if (shared->defined()) not_kept.insert(shared->storage_id());

  // The input, which the selective census tracks from the start.
  const Storage& input_storage = *input.storage();
  int64_t kept = input_storage.is_parameter || not_kept.contains(input_storage.id) ? 0 : input_storage.nbytes;
  bool accounted = true;
  live.for_each_live([&](int64_t id, int64_t bytes) {
    if (not_kept.contains(id)) return;
    // Made before the forward: kept from where an op handed it out, while it stays live.
    if (id < first_new_id_) {
      if (id != input_storage.id && old_outputs_.contains(id)) kept += bytes;
      return;
    }
    accounted = accounted && (cached_ids_.contains(id) || saved.saved(id));
  });
  if (!accounted) return;
  for (const Cached& c : cached_)
    if (!not_kept.contains(c.storage_id)) kept += c.bytes;

  reading.read = true;
  reading.kept_bytes = kept;
  if (ledger_) reading.shares = shares_of(*ledger_);
}

}  // namespace census
