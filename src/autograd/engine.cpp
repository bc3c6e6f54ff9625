#include "autograd/engine.h"

#include <cassert>
#include <functional>
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

// The running backward's hooks (a reentrant checkpoint's backward runs inside a node: it has its own).
struct GraphTask {
  int64_t id = 0;
  Node* current = nullptr;
  std::vector<std::function<void()>> post_hooks;  // on `current`, run once it has
  std::vector<std::function<void()>> final_callbacks;
};
thread_local GraphTask* g_graph_task = nullptr;
thread_local int64_t g_next_graph_task_id = 0;

}  // namespace

Node* current_autograd_node() { return g_graph_task != nullptr ? g_graph_task->current : nullptr; }
int64_t current_graph_task_id() { return g_graph_task != nullptr ? g_graph_task->id : -1; }

void register_post_hook(std::function<void()> hook) {
  assert(g_graph_task != nullptr && g_graph_task->current != nullptr && "a post-hook needs a running node");
  g_graph_task->post_hooks.push_back(std::move(hook));
}

void queue_callback(std::function<void()> callback) {
  assert(g_graph_task != nullptr && "a callback needs a running backward");
  g_graph_task->final_callbacks.push_back(std::move(callback));
}

void run_backward(const Tensor& root, const Tensor& grad) {
  assert(root.grad_fn() != nullptr);
  NoGradGuard no_grad;  // backward formulas run with grad mode off (create_graph=False)
  GraphTask task;
  task.id = g_next_graph_task_id++;
  GraphTask* const outer = g_graph_task;
  g_graph_task = &task;
  struct Restore {
    GraphTask* outer;
    ~Restore() { g_graph_task = outer; }
  } restore{outer};
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
    task.current = &fn;
    GradList outputs = accumulates ? GradList() : fn.apply(inputs);
    if (accumulates) accumulate_grad(static_cast<const AccumulateGrad&>(fn), inputs);
    validate_outputs(fn.next_edges(), outputs);
    if (!task.post_hooks.empty()) {
      std::vector<std::function<void()>> hooks = std::move(task.post_hooks);
      task.post_hooks.clear();
      for (const auto& hook : hooks) hook();
    }
    task.current = nullptr;
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
  // exec_post_processing: the queued callbacks, in order (one may queue another).
  for (size_t i = 0; i < task.final_callbacks.size(); ++i) {
    std::function<void()> callback = std::move(task.final_callbacks[i]);
    callback();
  }
}

}  // namespace census
