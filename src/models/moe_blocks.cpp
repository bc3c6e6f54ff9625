#include "models/moe_blocks.h"

#include <algorithm>

#include "models/llama.h"
#include "nn/hyperparallel.h"
#include "ops/ops.h"

namespace census {
namespace {

// Layer `index`'s experts: Transformers' (run as the experts implementation says), or HyperParallel's
// GroupedExperts where a replacement selects them.
std::unique_ptr<nn::MoeExperts> make_experts(const ModelConfig& c, int64_t index, int64_t width, nn::ParameterList& params) {
  if (layer_replacement(c, index, "mlp.experts", "Experts") == FusedModule::kGroupedExperts)
    return std::make_unique<nn::GroupedExperts>("mlp.experts", c.moe.num_experts, c.hidden_size, width, params);
  return std::make_unique<nn::Experts>("mlp.experts", c.moe.num_experts, c.hidden_size, width, c.hidden_act,
                                       c.moe.experts_implementation, params);
}

nn::TopKRouter make_router(const ModelConfig& c, nn::TopKRouter::Options options, nn::ParameterList& params) {
  return nn::TopKRouter("mlp.gate", c.moe.num_experts, c.moe.num_experts_per_tok, c.hidden_size, options, params);
}

}  // namespace

bool is_moe_layer(const ModelConfig& c, int64_t index) {
  const MoeConfig& moe = c.moe;
  switch (moe.block) {
    case MoeConfig::Block::kNone:
      return false;
    case MoeConfig::Block::kQwen3Moe:
    case MoeConfig::Block::kQwen2Moe:
      // Qwen's rule: not listed in mlp_only_layers (read sorted), and every decoder_sparse_step-th layer.
      return !std::binary_search(moe.mlp_only_layers.begin(), moe.mlp_only_layers.end(), index) &&
             moe.num_experts > 0 && (index + 1) % moe.decoder_sparse_step == 0;
    case MoeConfig::Block::kDeepseekV3:
      return index >= moe.first_k_dense_replace;
    case MoeConfig::Block::kMixtral:
    case MoeConfig::Block::kGptOss:
      return true;
  }
  return false;
}

Qwen3MoeSparseMoeBlock::Qwen3MoeSparseMoeBlock(const ModelConfig& c, int64_t index, nn::ParameterList& params)
    : experts(make_experts(c, index, c.moe.moe_intermediate_size, params)),
      gate(make_router(c, {c.moe.norm_topk_prob, /*weights_in_logits_dtype=*/true}, params)) {}

Tensor Qwen3MoeSparseMoeBlock::forward(const Tensor& hidden_states) const {
  ModuleScope scope(path_, ModuleKind::kOther);
  const Dims shape = hidden_states.sizes();  // (B, S, H)
  const Tensor hidden_states_reshaped = ops::view(hidden_states, Dims{shape[0] * shape[1], shape[2]});
  // Released at return, the last bound first: the indices (kept by topk), the weights, the logits.
  const nn::Routing routing = gate.forward(hidden_states_reshaped);
  Tensor final_hidden_states = experts->forward(hidden_states_reshaped, routing.indices, routing.weights);
  return ops::reshape(final_hidden_states, shape);
}

Qwen2MoeSparseMoeBlock::Qwen2MoeSparseMoeBlock(const ModelConfig& c, int64_t index, nn::ParameterList& params)
    : gate(make_router(c, {c.moe.norm_topk_prob, /*weights_in_logits_dtype=*/true}, params)),
      experts(make_experts(c, index, c.moe.moe_intermediate_size, params)),
      shared_expert("mlp.shared_expert", c.hidden_size, c.moe.shared_expert_intermediate_size, false, params,
                    c.hidden_act),
      shared_expert_gate("mlp.shared_expert_gate", c.hidden_size, 1, false, params) {}

Tensor Qwen2MoeSparseMoeBlock::forward(const Tensor& hidden_states) const {
  ModuleScope scope(path_, ModuleKind::kOther);
  const Dims shape = hidden_states.sizes();
  const Tensor hidden_states_reshaped = ops::view(hidden_states, Dims{shape[0] * shape[1], shape[2]});
  Tensor shared_expert_output = shared_expert.forward(hidden_states_reshaped);  // (T, H)
  const nn::Routing routing = gate.forward(hidden_states_reshaped);
  Tensor expert_output = experts->forward(hidden_states_reshaped, routing.indices, routing.weights);
  // The gate (T, 1) is a temporary; sigmoid keeps its own output.
  shared_expert_output = ops::mul(ops::sigmoid(shared_expert_gate.forward(hidden_states_reshaped)), shared_expert_output);
  expert_output = ops::add(expert_output, shared_expert_output);
  return ops::reshape(expert_output, shape);
}

MixtralSparseMoeBlock::MixtralSparseMoeBlock(const ModelConfig& c, int64_t index, nn::ParameterList& params)
    : gate(make_router(c, {/*norm_topk_prob=*/true, /*weights_in_logits_dtype=*/false}, params)),
      experts(make_experts(c, index, c.intermediate_size, params)) {}

// router_jitter_noise multiplies the input in place only when it is set; the census refuses it
// (read_mixtral), so the block is the router and the experts.
Tensor MixtralSparseMoeBlock::forward(const Tensor& input) const {
  ModuleScope scope(path_, ModuleKind::kOther);
  const Dims shape = input.sizes();
  Tensor hidden_states = ops::view(input, Dims{shape[0] * shape[1], shape[2]});
  const nn::Routing routing = gate.forward(hidden_states);
  hidden_states = experts->forward(hidden_states, routing.indices, routing.weights);
  return ops::reshape(hidden_states, shape);
}

std::unique_ptr<nn::FeedForward> build_feed_forward(const ModelConfig& c, int64_t index, nn::ParameterList& params) {
  if (is_moe_layer(c, index)) {
    switch (c.moe.block) {
      case MoeConfig::Block::kQwen3Moe:
        return std::make_unique<Qwen3MoeSparseMoeBlock>(c, index, params);
      case MoeConfig::Block::kQwen2Moe:
        return std::make_unique<Qwen2MoeSparseMoeBlock>(c, index, params);
      case MoeConfig::Block::kMixtral:
        return std::make_unique<MixtralSparseMoeBlock>(c, index, params);
      default:
        break;  // DeepSeek-V3 and GPT-OSS build their blocks in their own layers
    }
  }
  return std::make_unique<nn::GatedMLP>("mlp", c.hidden_size, c.intermediate_size, c.mlp_bias, params, c.hidden_act);
}

}  // namespace census
