// File: saved_variable.h
// SavedVariable: a tensor a node keeps for its backward, and the saved-tensor hooks it is packed
// through (torch.autograd.graph.saved_tensors_hooks). Without other hooks a census Session's own see
// each save (observers' on_save) and the variable keeps the whole tensor, storage alive, never copied;
// a checkpointed region's hooks keep a holder instead, whose tensor its recompute makes.
#pragma once

#include <cstdint>

#include "tensor/tensor.h"

namespace census {

class SavedTensorHooks {
 public:
  enum class Packed : uint8_t {
    kKept,     // the variable keeps the tensor
    kHeld,     // the hooks keep a holder for it, named by `slot`; `owner` keeps the hooks alive
    kDropped,  // nothing is kept
  };
  virtual ~SavedTensorHooks() = default;
  // The pack hook, as a node saves `tensor`.
  virtual Packed pack(const Tensor& tensor, Ref<SavedTensorHooks>& owner, int64_t& slot) = 0;
  // The unpack hook of a held tensor.
  virtual Tensor unpack(int64_t /*slot*/) { return Tensor(); }
  // A held tensor's variable has gone (its node ran, or the graph was dropped).
  virtual void release(int64_t /*slot*/) {}
};

class SavedVariable {
 public:
  SavedVariable() = default;
  ~SavedVariable() { reset(); }
  SavedVariable(const SavedVariable&) = delete;
  SavedVariable& operator=(const SavedVariable&) = delete;

  // `is_output`: the op's own result, kept without its history (a node holding its own output through
  // that output's grad_fn would be a cycle); an input is kept as it is.
  void save(const Tensor& tensor, bool is_output = false);
  // The saved tensor, or the hooks' for a held one.
  Tensor unpack() const { return hooks_ ? hooks_->unpack(slot_) : data_; }
  void reset();

 private:
  Tensor data_;
  Ref<SavedTensorHooks> hooks_;  // set while held
  int64_t slot_ = -1;
};

}  // namespace census
