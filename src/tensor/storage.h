// File: storage.h
// Storage: the bytes behind one or more tensors. A census never holds data, only the size; what it
// tracks is when a storage comes to life and when its last handle goes away, as PyTorch frees it.
#pragma once

#include <cstdint>
#include <memory>

#include "tensor/ref.h"

namespace census {

struct Storage;

// Told of each storage's death. The Session of a census is its storages' listener; its heap learns of
// a birth when an op hands the storage out.
class StorageListener {
 public:
  virtual ~StorageListener() = default;
  virtual void on_free(const Storage& storage) = 0;
};

struct Storage final : RefCounted {
  Storage(int64_t id, int64_t nbytes, bool is_parameter, StorageListener* listener)
      : id(id), nbytes(nbytes), is_parameter(is_parameter), listener(listener) {}
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage() {
    if (listener != nullptr) listener->on_free(*this);
  }

  const int64_t id;  // unique within one census; ids restart with each census
  // The whole storage, as PyTorch's untyped_storage().nbytes(); for a storage that stands for the same
  // storage of several alike loop iterations, all of theirs (Note [Alike iterations], ops/dispatch.h).
  int64_t nbytes;
  const bool is_parameter;
  StorageListener* listener;
};

}  // namespace census
