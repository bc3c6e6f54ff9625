// File: node.h
// Autograd graph nodes as PyTorch's eager autograd builds them: each op that sees an input requiring
// grad creates a Node with the next sequence number, edges to its inputs' producers, and the tensors
// its backward formula names (SavedVariable). The graph is data: the engine that runs it
// (autograd/engine.h) lives above the ops its formulas call.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <memory>
#include <string_view>

#include "graph/context.h"
#include "graph/saved_variable.h"
#include "tensor/arena.h"
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

class Node : public RefCounted {
 public:
  static constexpr uint64_t kAccumulateGradSequenceNr = std::numeric_limits<uint64_t>::max();

  Node(std::string_view name, uint64_t sequence_nr) : name_(name), sequence_nr_(sequence_nr) {}
  virtual ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // Gradients of the node's inputs (its forward inputs), one per next edge; undefined where the
  // edge is invalid. `grads` are the gradients of its forward outputs, by output number.
  virtual GradList apply(GradList& grads) = 0;
  // Drop every SavedVariable the node owns, in declaration order, as release_variables() does once
  // the node has run.
  void release_variables() {
    for (SavedVariable* saved = first_saved_; saved != nullptr; saved = saved->next_in_node_) saved->reset();
  }

  std::string_view name() const { return name_; }
  uint64_t sequence_nr() const { return sequence_nr_; }
  // A leaf's accumulator (accumulate_grad.h), which the engine runs itself.
  bool is_accumulate_grad() const { return sequence_nr_ == kAccumulateGradSequenceNr; }
  const SmallVector<Edge, 8>& next_edges() const { return next_edges_; }
  SmallVector<Edge, 8>& next_edges() { return next_edges_; }
  // How many gradients flow into this node: its forward outputs.
  uint32_t num_inputs() const { return num_inputs_; }
  void set_num_inputs(uint32_t n) { num_inputs_ = n; }
  bool should_compute_output(size_t i) const { return i < next_edges_.size() && next_edges_[i].valid(); }

 private:
  std::string_view name_;
  uint64_t sequence_nr_;
  friend class SavedVariable;
  SmallVector<Edge, 8> next_edges_;
  uint32_t num_inputs_ = 1;
  SavedVariable* first_saved_ = nullptr;  // the variables it owns, a list in declaration order
  SavedVariable* last_saved_ = nullptr;

 public:
  // The engine's bookkeeping for one backward: edges still to arrive, and the InputBuffer.
  int pending_dependencies = 0;
  bool reached = false;
  GradList input_buffer;
};

inline SavedVariable::SavedVariable(Node* owner) {
  (owner->last_saved_ != nullptr ? owner->last_saved_->next_in_node_ : owner->first_saved_) = this;
  owner->last_saved_ = this;
}

// The edge that a gradient of `tensor` takes: to its grad_fn, to a leaf's AccumulateGrad (made on
// first use and shared after, as PyTorch caches it), or nowhere if it needs no gradient.
Edge gradient_edge(const Tensor& tensor);

// Attach `node` as the producer of `out` (its output `output_nr`).
void set_history(const Tensor& out, const Ref<Node>& node, uint32_t output_nr = 0);

// Make node T for an op with differentiable `inputs` if grad mode is on and any input requires grad;
// else nullptr (no node, nothing saved).
template <class T, class... Args>
Ref<T> make_node(std::initializer_list<const Tensor*> inputs, Args&&... args) {
  GraphContext& context = GraphContext::current();
  if (!context.grad_enabled()) return nullptr;
  bool any = false;
  for (const Tensor* input : inputs) any = any || (input->defined() && input->requires_grad());
  if (!any) return nullptr;
  auto node = arena_shared<T>(context.next_sequence_nr(), std::forward<Args>(args)...);
  for (const Tensor* input : inputs) node->next_edges().push_back(input->defined() ? gradient_edge(*input) : Edge{});
  return node;
}

}  // namespace census
