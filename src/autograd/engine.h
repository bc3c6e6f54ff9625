// File: engine.h
// The backward engine as PyTorch's runs it on one thread: from the root, the ready node with the
// highest sequence number runs first (AccumulateGrad, numbered UINT64_MAX, as soon as it is ready).
// Running a node: take its gradients out of its InputBuffer, apply it under no_grad, validate its
// outputs (sum_to a broadcast input's shape, cast to the input's dtype), drop its incoming gradients,
// release its saved tensors, then hand each output to the next node's InputBuffer.
//
// Saved-tensor hooks that act per node (TRL's OffloadActivations) see the running backward as
// torch.autograd lets them: the node running now, the backward's id, post-hooks on that node, and
// callbacks at the backward's end.
#pragma once

#include <cstdint>
#include <functional>

#include "tensor/tensor.h"

namespace census {

class Node;

// Run the backward of `root` with gradient `grad` (as out.backward(grad)); the graph is not kept.
void run_backward(const Tensor& root, const Tensor& grad);

// torch._C._current_autograd_node(): the node the engine is running; null outside a backward.
Node* current_autograd_node();
// torch._C._current_graph_task_id(): the id of the backward running now, new with each; -1 outside one.
int64_t current_graph_task_id();
// current_autograd_node().register_hook(hook): `hook` runs once that node has run and its outputs are
// validated, while its incoming gradients and saved tensors are still held (PyTorch's call_post_hooks).
void register_post_hook(std::function<void()> hook);
// Variable._execution_engine.queue_callback(callback): runs once the running backward's last node has.
void queue_callback(std::function<void()> callback);

}  // namespace census
