// File: saved_variable.h
// SavedVariable: a tensor a node keeps for its backward, and the saved-tensor hooks it is packed
// through (torch.autograd.graph.saved_tensors_hooks). Without other hooks a census Session's own see
// each save (observers' on_save) and the variable keeps the whole tensor, storage alive, never copied;
// a checkpointed region's hooks keep a holder instead, whose tensor its recompute makes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>

#include "tensor/tensor.h"

namespace census {

class Node;

class SavedTensorHooks : public RefCounted {
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

// A node declares each as `SavedVariable self_{this};`: the variable registers with its node, which
// releases every one it owns once it has run, in the order they were declared (Node::release_variables).
class SavedVariable {
 public:
  explicit SavedVariable(Node* owner);
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
  friend class Node;
  Tensor data_;
  Ref<SavedTensorHooks> hooks_;  // set while held
  int64_t slot_ = -1;
  SavedVariable* next_in_node_ = nullptr;  // the owner's next variable, in declaration order
};

// Saved variables counted when the node is made (a contract's saves, an index's indices), each
// registered with the node as a member would be.
class SavedVariableList {
 public:
  SavedVariableList(Node* owner, size_t count) {
    for (size_t i = 0; i < count; ++i) items_.emplace_back(owner);
  }
  SavedVariable& operator[](size_t i) { return items_[i]; }
  size_t size() const { return items_.size(); }
  auto begin() { return items_.begin(); }
  auto end() { return items_.end(); }

 private:
  std::deque<SavedVariable> items_;  // grows in place: a variable never moves from where it registered
};

}  // namespace census
