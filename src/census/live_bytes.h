// File: live_bytes.h
// LiveBytes: the heap a census reads. It counts a storage from the moment an op hands it out (or the
// census tracks an input) until it is freed, and logs each birth and death as an event, as the
// reference's tracker logs them. Parameters are never counted: the memory model prices them apart.
//
// The peak rule (Note [Backward peak]): from a given event on, find the moment the most tracked bytes
// are live, leaving some storages out entirely (the layer's output) and counting others only toward
// finding the moment (the parameters' gradients); report the bytes live then, less the latter.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/dispatch.h"

namespace census {

// A set of storage ids, dense within one census.
class StorageSet {
 public:
  void insert(int64_t id) {
    if (id >= static_cast<int64_t>(bits_.size())) bits_.resize(id + 1, 0);
    bits_[id] = 1;
  }
  bool contains(int64_t id) const { return id < static_cast<int64_t>(bits_.size()) && bits_[id]; }

 private:
  std::vector<uint8_t> bits_;
};

class LiveBytes final : public Observer {
 public:
  LiveBytes() : Observer(kOnOp | kOnFree | kOnResize) {}
  struct Event {
    int64_t storage_id;
    int64_t delta_bytes;  // > 0 when counted from now, < 0 when freed
  };

  void track(const Tensor& tensor);
  void on_op(const OpCall& call) override;
  void on_free(const Storage& storage) override;
  // A live storage grown to stand for alike iterations' (Note [Alike iterations]): an event of the
  // bytes it adds.
  void on_resize(const Storage& storage, int64_t old_nbytes) override;

  size_t event_count() const { return events_.size(); }
  const std::vector<Event>& events() const { return events_; }
  bool is_live(int64_t storage_id) const {
    return storage_id < static_cast<int64_t>(live_bytes_.size()) && live_bytes_[storage_id] > 0;
  }
  // visit(storage_id, bytes) for every storage live now.
  template <class Visit>
  void for_each_live(Visit&& visit) const {
    for (size_t id = 0; id < live_bytes_.size(); ++id)
      if (live_bytes_[id] > 0) visit(static_cast<int64_t>(id), live_bytes_[id]);
  }
  // Bytes live now, storages in `excluded` left out.
  int64_t live_bytes(const StorageSet& excluded) const;

  struct Peak {
    int64_t bytes;                // at the peak, `apart` storages left out
    int64_t bytes_with_apart;     // at the peak, `apart` storages counted
    size_t event_index;           // the event that reached it (start - 1 if none rose above the start)
  };
  Peak peak_from(size_t start, const StorageSet& excluded, const StorageSet& apart) const;

 private:
  std::vector<int64_t> live_bytes_;  // by storage id: bytes while tracked and live, else 0
  std::vector<Event> events_;
};

// The storages of gradients handed to parameters (the parameters' tensor hooks): the `apart` set of
// the peak rule.
class ParameterGrads final : public Observer {
 public:
  ParameterGrads() : Observer(kOnParameterGrad) {}
  void on_parameter_grad(const Tensor& grad) override { ids.insert(grad.storage_id()); }
  StorageSet ids;
};

}  // namespace census
