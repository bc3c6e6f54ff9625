// File: moe_layers.h
// What the mixture-of-experts families share in models/: reading the routed experts a config states,
// and building a layer's experts and softmax top-k router (nn/moe.h), Transformers' experts or the
// fused GroupedExperts where a train.yaml's replacement selects them.
#pragma once

#include <memory>

#include "models/config.h"
#include "nn/moe.h"

namespace census {

// The routed experts every MoE family states: how many (under `experts_field`, or its alias in the
// family's attribute_map), how many a token picks, refusing what no router can run; and the
// config's _experts_implementation.
Status read_routed_experts(const ConfigReader& reader, const char* experts_field, const char* experts_alias,
                           int64_t default_experts, int64_t default_top_k, MoeConfig& moe);

// Layer `index`'s experts at "mlp.experts", `width` wide: Transformers' (run as the experts
// implementation says), or HyperParallel's GroupedExperts where a replacement selects them.
std::unique_ptr<nn::MoeExperts> make_routed_experts(const ModelConfig& config, int64_t index, int64_t width,
                                                    nn::ParameterList& params);

// The softmax top-k router at "mlp.gate".
nn::TopKRouter make_topk_router(const ModelConfig& config, nn::TopKRouter::Options options, nn::ParameterList& params);

}  // namespace census
