// File: saved_tensors.h
// SavedTensors: the saved-tensor pack hook of a census. It records each storage autograd saves the
// first time it is saved (parameters left out), and the op of the cost model's op vector whose backward
// takes it (Note [Saved-op classes]).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "census/live_bytes.h"
#include "ops/dispatch.h"

namespace census {

// Note [Saved-op classes] The op vector of the cost model: a delta rule's saves are linrec; the
// attention kernel's inputs and output attBMM, its fp32 statistics softmax; a dropout's mask dropout;
// what a norm saves normOp; what the feed-forward's activation function saves ffAct; the rest by the
// part of the layer saving it, the attention's (attMM) or the feed-forward's (ffMM), or other for the
// decoder layer's own code.
enum class SavedOp : uint8_t { kAttMM, kAttBMM, kSoftmax, kNormOp, kFfMM, kFfAct, kDropout, kLinrec, kOther, kCount };
inline constexpr size_t kSavedOpCount = static_cast<size_t>(SavedOp::kCount);
std::string_view saved_op_name(SavedOp op);

struct SavedStorage {
  int64_t storage_id;
  int64_t bytes;           // the whole storage
  SavedOp op;
  DType dtype;             // of the tensor first saved on it
  Dims shape;
  std::string_view module;  // path of the innermost module running when it was first saved
  std::string_view by_op;   // the aten op dispatched last before that save
};

class SavedTensors final : public Observer {
 public:
  SavedTensors() : Observer(kOnSave | kOnResize) {}
  void on_save(const Tensor& tensor, const OpDef* by_op) override;
  void on_resize(const Storage& storage, int64_t old_nbytes) override;
  const std::vector<SavedStorage>& storages() const { return storages_; }
  bool saved(int64_t storage_id) const { return seen_.contains(storage_id); }

 private:
  std::vector<SavedStorage> storages_;
  StorageSet seen_;
  std::vector<int32_t> index_by_id_;  // storage id -> its entry in storages_, for on_resize
};

}  // namespace census
