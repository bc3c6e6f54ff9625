#include "census/live_bytes.h"

namespace census {

void LiveBytes::track(const Tensor& tensor) {
  const Storage& storage = *tensor.storage();
  if (storage.is_parameter || storage.nbytes == 0) return;
  if (storage.id >= static_cast<int64_t>(live_bytes_.size())) live_bytes_.resize(storage.id + 64, 0);
  if (live_bytes_[storage.id] != 0) return;
  live_bytes_[storage.id] = storage.nbytes;
  events_.push_back({storage.id, storage.nbytes});
}

void LiveBytes::on_op(const OpCall& call) {
  for (const Tensor& out : call.outputs) track(out);
}

void LiveBytes::on_free(const Storage& storage) {
  if (storage.id >= static_cast<int64_t>(live_bytes_.size()) || live_bytes_[storage.id] == 0) return;
  events_.push_back({storage.id, -live_bytes_[storage.id]});
  live_bytes_[storage.id] = 0;
}

void LiveBytes::on_resize(const Storage& storage, int64_t /*old_nbytes*/) {
  if (storage.id >= static_cast<int64_t>(live_bytes_.size()) || live_bytes_[storage.id] == 0) return;
  events_.push_back({storage.id, storage.nbytes - live_bytes_[storage.id]});
  live_bytes_[storage.id] = storage.nbytes;
}

int64_t LiveBytes::live_bytes(const StorageSet& excluded) const {
  int64_t total = 0;
  for (size_t id = 0; id < live_bytes_.size(); ++id)
    if (!excluded.contains(static_cast<int64_t>(id))) total += live_bytes_[id];
  return total;
}

LiveBytes::Peak LiveBytes::peak_from(size_t start, const StorageSet& excluded, const StorageSet& apart) const {
  int64_t live = 0, held = 0;
  for (size_t i = 0; i < start; ++i) {
    const Event& e = events_[i];
    if (excluded.contains(e.storage_id)) continue;
    live += e.delta_bytes;
    if (apart.contains(e.storage_id)) held += e.delta_bytes;
  }
  Peak peak{live - held, live, start - 1};
  for (size_t i = start; i < events_.size(); ++i) {
    const Event& e = events_[i];
    if (excluded.contains(e.storage_id)) continue;
    live += e.delta_bytes;
    if (apart.contains(e.storage_id)) held += e.delta_bytes;
    if (live > peak.bytes_with_apart) peak = Peak{live - held, live, i};
  }
  return peak;
}

}  // namespace census
