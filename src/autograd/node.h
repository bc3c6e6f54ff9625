// File: node.h
// Autograd graph nodes as PyTorch's eager autograd builds them: each op that sees an input requiring
// grad creates a Node with the next sequence number, edges to its inputs' producers, and the tensors
// its backward formula names (SavedVariable). The engine (engine.h) runs them.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <memory>
#include <string_view>
#include <vector>

#include "tensor/tensor.h"
#include "util/small_vector.h"

namespace census {

class Node;

// The gradients flowing into or out of a node: one per forward output, or one per input (at most six:
// the gated delta rule kernel's contract takes five tensors).
using GradList = SmallVector<Tensor, 8>;

// Where a gradient goes: input `input_nr` of node `fn`, with the metadata of the forward tensor it
// belongs to, which the engine's validate_outputs uses to reduce and cast the gradient.
struct Edge {
  Ref<Node> fn;
  uint32_t input_nr = 0;
  Dims sizes;
  DType dtype = DType::kBFloat16;

  bool valid() const { return fn != nullptr; }
};

class CheckpointFrame;

// SavedVariable: a tensor a node keeps for its backward. It keeps the whole storage alive and never
// copies. The pack hook (observers' on_save) sees it as it is saved. States follow PyTorch's: empty,
// saved, released after the node ran; in a checkpointed region, packed: a holder whose tensor the
// region's recompute makes (autograd/checkpoint.h).
class SavedVariable {
 public:
  enum class State : uint8_t { kEmpty, kSaved, kPacked, kReleased };

  SavedVariable() = default;
  ~SavedVariable();
  SavedVariable(const SavedVariable&) = delete;
  SavedVariable& operator=(const SavedVariable&) = delete;

  // `is_output`: the op's own result, kept without its history (a node holding its own output through
  // that output's grad_fn would be a cycle); an input is kept as it is.
  void save(const Tensor& tensor, bool is_output = false);
  // The saved tensor; a holder's recomputed one, taken from its frame (the recompute runs first if
  // it has not yet).
  Tensor unpack();
  void reset();
  State state() const { return state_; }

 private:
  Tensor data_;
  Ref<CheckpointFrame> frame_;
  int64_t holder_ = -1;
  State state_ = State::kEmpty;
};

class Node {
 public:
  static constexpr uint64_t kAccumulateGradSequenceNr = std::numeric_limits<uint64_t>::max();

  Node(std::string_view name, uint64_t sequence_nr) : name_(name), sequence_nr_(sequence_nr) {}
  virtual ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // Gradients of the node's inputs (its forward inputs), one per next edge; undefined where the
  // edge is invalid. `grads` are the gradients of its forward outputs, by output number.
  virtual GradList apply(GradList& grads) = 0;
  // Drop every SavedVariable, as release_variables() does once the node has run.
  virtual void release_variables() {}

  std::string_view name() const { return name_; }
  uint64_t sequence_nr() const { return sequence_nr_; }
  const SmallVector<Edge, 8>& next_edges() const { return next_edges_; }
  SmallVector<Edge, 8>& next_edges() { return next_edges_; }
  // How many gradients flow into this node: its forward outputs.
  uint32_t num_inputs() const { return num_inputs_; }
  void set_num_inputs(uint32_t n) { num_inputs_ = n; }
  bool should_compute_output(size_t i) const { return i < next_edges_.size() && next_edges_[i].valid(); }

 private:
  std::string_view name_;
  uint64_t sequence_nr_;
  SmallVector<Edge, 8> next_edges_;
  uint32_t num_inputs_ = 1;

 public:
  // The engine's bookkeeping for one backward: edges still to arrive, and the InputBuffer.
  int pending_dependencies = 0;
  bool reached = false;
  GradList input_buffer;
};

// The edge that a gradient of `tensor` takes: to its grad_fn, to a leaf's AccumulateGrad (made on
// first use and shared after, as PyTorch caches it), or nowhere if it needs no gradient.
Edge gradient_edge(const Tensor& tensor);

// Attach `node` as the producer of `out` (its output `output_nr`).
void set_history(const Tensor& out, const Ref<Node>& node, uint32_t output_nr = 0);

// Make node T for an op with differentiable `inputs` if grad mode is on and any input requires grad;
// else nullptr (no node, nothing saved).
template <class T, class... Args>
Ref<T> make_node(std::initializer_list<const Tensor*> inputs, Args&&... args);

}  // namespace census

#include "autograd/node_inl.h"
