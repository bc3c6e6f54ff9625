#include "nn/sparse_moe_block.h"

#include "ops/ops.h"

namespace census::nn {

SparseMoeBlock::SparseMoeBlock(std::string path, TopKRouter gate_in, std::unique_ptr<MoeExperts> experts_in,
                               SharedExpert shared, int64_t hidden_size, ParameterList& params)
    : path_(std::move(path)), gate(std::move(gate_in)), experts(std::move(experts_in)) {
  if (shared.intermediate_size > 0) {
    shared_expert.emplace(child_path(path_, "shared_expert"), hidden_size, shared.intermediate_size, false, params,
                          shared.act);
    shared_expert_gate.emplace(child_path(path_, "shared_expert_gate"), hidden_size, 1, false, params);
  }
}

Tensor SparseMoeBlock::forward(const Tensor& hidden_states) const {
  ModuleScope scope(path_, ModuleKind::kOther);
  const Dims shape = hidden_states.sizes();  // (B, S, H)
  const Tensor hidden_states_reshaped = ops::view(hidden_states, Dims{shape[0] * shape[1], shape[2]});
  Tensor shared_expert_output;
  if (shared_expert) shared_expert_output = shared_expert->forward(hidden_states_reshaped);  // (T, H)
  // Released at return, the last bound first: the indices (kept by topk), the weights, the logits.
  const Routing routing = gate.forward(hidden_states_reshaped);
  Tensor expert_output = experts->forward(hidden_states_reshaped, routing.indices, routing.weights);
  if (shared_expert) {
    // The gate (T, 1) is a temporary; sigmoid keeps its own output.
    shared_expert_output =
        ops::mul(ops::sigmoid(shared_expert_gate->forward(hidden_states_reshaped)), shared_expert_output);
    expert_output = ops::add(expert_output, shared_expert_output);
  }
  return ops::reshape(expert_output, shape);
}

}  // namespace census::nn
