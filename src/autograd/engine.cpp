#include "autograd/engine.h"

#include <cassert>
#include <queue>
#include <memory>
#include <vector>

#include "autograd/accumulate.h"
#include "graph/node.h"
#include "ops/dispatch.h"
#include "ops/ops.h"

namespace census {
namespace {

struct NodeTask {
  Node* fn;
  uint64_t sequence_nr;  // fn's, kept here: the heap compares them at every push and pop
  uint64_t order;        // breaks ties among AccumulateGrad nodes: first ready, first run
};

// Note [Ready order] PyTorch's CompareNodeTaskTime: the higher sequence_nr runs first.
struct CompareNodeTaskTime {
  bool operator()(const NodeTask& a, const NodeTask& b) const {
    if (a.sequence_nr != b.sequence_nr) return a.sequence_nr < b.sequence_nr;
    return a.order > b.order;
  }
};

// Note [InputBuffer accumulation under a dispatch mode]
// InputBuffer::accumulate adds a second gradient in place only when the buffered one is the last
// reference to its storage and neither is "tensor-subclass-like". A census's reference measures
// under a TorchDispatchMode, and with a mode active every tensor counts as subclass-like
// (at::isTensorSubclassLike), so accumulation is always out of place: old + var, a new allocation.
void accumulate(Tensor& slot, Tensor&& incoming) {
  if (!slot.defined()) {
    slot = std::move(incoming);
    return;
  }
  Tensor sum = ops::add(slot, incoming);
  incoming = Tensor();
  slot = std::move(sum);
}

// validate_outputs: a gradient of another shape is summed to its input's shape; one of another dtype
// is cast to the input's dtype. Each replaces the gradient (the former one is freed if unreferenced).
void validate_outputs(const SmallVector<Edge, 8>& edges, GradList& grads) {
  for (size_t i = 0; i < grads.size() && i < edges.size(); ++i) {
    if (!edges[i].valid() || !grads[i].defined()) continue;
    if (grads[i].sizes() != edges[i].sizes) grads[i] = ops::sum_to(grads[i], edges[i].sizes);
    if (grads[i].dtype() != edges[i].dtype) grads[i] = ops::to(grads[i], edges[i].dtype);
  }
}

// compute_dependencies: how many edges lead into each node reachable from the root.
void compute_dependencies(Node* root, std::vector<Node*>& stack) {
  root->reached = true;
  stack.push_back(root);
  while (!stack.empty()) {
    Node* fn = stack.back();
    stack.pop_back();
    for (const Edge& edge : fn->next_edges()) {
      if (!edge.valid()) continue;
      Node* next = edge.fn.get();
      next->pending_dependencies += 1;
      if (!next->reached) {
        next->reached = true;
        stack.push_back(next);
      }
    }
  }
}

}  // namespace

void run_backward(const Tensor& root, const Tensor& grad) {
  assert(root.grad_fn() != nullptr);
  NoGradGuard no_grad;  // backward formulas run with grad mode off (create_graph=False)
  std::vector<Node*> scratch;
  scratch.reserve(64);
  compute_dependencies(root.grad_fn().get(), scratch);
  std::vector<NodeTask> heap;
  heap.reserve(16);
  std::priority_queue<NodeTask, std::vector<NodeTask>, CompareNodeTaskTime> ready(CompareNodeTaskTime{},
                                                                                 std::move(heap));
  uint64_t order = 0;

  Node* root_fn = root.grad_fn().get();
  root_fn->input_buffer.resize(root_fn->num_inputs());
  root_fn->input_buffer[root.output_nr()] = grad;
  ready.push(NodeTask{root_fn, root_fn->sequence_nr(), order++});

  while (!ready.empty()) {
    Node& fn = *ready.top().fn;
    ready.pop();
    // call_function: the incoming gradients (the buffer, moved out and so emptied) live until it
    // returns.
    GradList inputs = std::move(fn.input_buffer);
    const bool accumulates = fn.is_accumulate_grad();
    GradList outputs = accumulates ? GradList() : fn.apply(inputs);
    if (accumulates) accumulate_grad(static_cast<const AccumulateGrad&>(fn), inputs);
    validate_outputs(fn.next_edges(), outputs);
    inputs.clear();
    fn.release_variables();
    for (size_t i = 0; i < outputs.size() && i < fn.next_edges().size(); ++i) {
      const Edge& edge = fn.next_edges()[i];
      if (!edge.valid()) continue;
      Node* next = edge.fn.get();
      if (next->input_buffer.empty()) next->input_buffer.resize(next->num_inputs());
      if (outputs[i].defined()) accumulate(next->input_buffer[edge.input_nr], std::move(outputs[i]));
      if (--next->pending_dependencies == 0) ready.push(NodeTask{next, next->sequence_nr(), order++});
    }
  }
}

}  // namespace census
