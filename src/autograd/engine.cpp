#include "autograd/engine.h"

#include <cassert>
#include <queue>
#include <unordered_map>
#include <vector>

#include "autograd/node.h"
#include "ops/dispatch.h"
#include "ops/ops.h"

namespace census {
namespace {

struct NodeTask {
  std::shared_ptr<Node> fn;
  std::vector<Tensor> inputs;  // the InputBuffer's gradients
  uint64_t order;              // breaks ties among AccumulateGrad nodes: first ready, first run
};

// Note [Ready order] PyTorch's CompareNodeTaskTime: the higher sequence_nr runs first.
struct CompareNodeTaskTime {
  bool operator()(const NodeTask& a, const NodeTask& b) const {
    if (a.fn->sequence_nr() != b.fn->sequence_nr()) return a.fn->sequence_nr() < b.fn->sequence_nr();
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
void validate_outputs(const std::vector<Edge>& edges, std::vector<Tensor>& grads) {
  for (size_t i = 0; i < grads.size() && i < edges.size(); ++i) {
    if (!edges[i].valid() || !grads[i].defined()) continue;
    if (grads[i].sizes() != edges[i].sizes) grads[i] = ops::sum_to(grads[i], edges[i].sizes);
    if (grads[i].dtype() != edges[i].dtype) grads[i] = ops::to(grads[i], edges[i].dtype);
  }
}

std::unordered_map<Node*, int> compute_dependencies(Node* root) {
  std::unordered_map<Node*, int> dependencies;
  std::vector<Node*> stack{root};
  std::unordered_map<Node*, bool> seen{{root, true}};
  while (!stack.empty()) {
    Node* fn = stack.back();
    stack.pop_back();
    for (const Edge& edge : fn->next_edges()) {
      if (!edge.valid()) continue;
      Node* next = edge.fn.get();
      dependencies[next] += 1;
      if (!seen[next]) {
        seen[next] = true;
        stack.push_back(next);
      }
    }
  }
  return dependencies;
}

}  // namespace

void run_backward(const Tensor& root, const Tensor& grad) {
  assert(root.grad_fn() != nullptr);
  NoGradGuard no_grad;  // backward formulas run with grad mode off (create_graph=False)
  std::unordered_map<Node*, int> dependencies = compute_dependencies(root.grad_fn().get());
  std::unordered_map<Node*, std::vector<Tensor>> not_ready;
  std::priority_queue<NodeTask, std::vector<NodeTask>, CompareNodeTaskTime> ready;
  uint64_t order = 0;

  {
    std::vector<Tensor> root_inputs(root.grad_fn()->num_inputs());
    root_inputs[root.output_nr()] = grad;
    ready.push(NodeTask{root.grad_fn(), std::move(root_inputs), order++});
  }

  while (!ready.empty()) {
    NodeTask task = std::move(const_cast<NodeTask&>(ready.top()));
    ready.pop();
    Node& fn = *task.fn;
    std::vector<Tensor> outputs;
    {
      // call_function: the incoming gradients live until it returns.
      std::vector<Tensor> inputs = std::move(task.inputs);
      outputs = fn.apply(inputs);
      validate_outputs(fn.next_edges(), outputs);
    }
    fn.release_variables();
    for (size_t i = 0; i < outputs.size() && i < fn.next_edges().size(); ++i) {
      const Edge& edge = fn.next_edges()[i];
      if (!edge.valid()) continue;
      Node* next = edge.fn.get();
      const bool is_ready = --dependencies[next] == 0;
      auto found = not_ready.find(next);
      std::vector<Tensor>& buffer =
          found != not_ready.end() ? found->second : not_ready.emplace(next, next->num_inputs()).first->second;
      if (outputs[i].defined()) accumulate(buffer[edge.input_nr], std::move(outputs[i]));
      if (is_ready) {
        ready.push(NodeTask{edge.fn, std::move(buffer), order++});
        not_ready.erase(next);
      }
    }
  }
}

}  // namespace census
