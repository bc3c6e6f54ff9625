#include "models/moe_layers.h"

#include "models/llama.h"
#include "nn/hyperparallel.h"

namespace census {

Status read_routed_experts(const ConfigReader& r, const char* experts_field, const char* experts_alias,
                           int64_t default_experts, int64_t default_top_k, MoeConfig& moe) {
  const char* field = r.has(experts_field) || !r.has(experts_alias) ? experts_field : experts_alias;
  CENSUS_ASSIGN(const int64_t experts, r.count(field, default_experts));
  if (experts == 0)
    return refuse(field, "is 0: a mixture of experts needs at least one expert; for a dense model use its dense model_type");
  CENSUS_ASSIGN(const int64_t top_k, r.size("num_experts_per_tok", default_top_k));
  if (top_k > experts)
    return refuse("num_experts_per_tok", std::to_string(top_k) + " exceeds the " + std::to_string(experts) +
                                             " experts (" + field + "); a token cannot pick more experts than there are");
  // A config object a trainer set up carries Transformers' _experts_implementation; the census's
  // default is the reference's, grouped_mm.
  CENSUS_ASSIGN(const std::string implementation, r.text("_experts_implementation", "grouped_mm"));
  if (implementation != "grouped_mm" && implementation != "eager")
    return refuse("_experts_implementation", "'" + implementation + "' is not priced; use grouped_mm or eager");
  moe.num_experts = experts;
  moe.num_experts_per_tok = top_k;
  moe.experts_implementation =
      implementation == "eager" ? nn::ExpertsImplementation::kEager : nn::ExpertsImplementation::kGroupedMm;
  return {};
}

std::unique_ptr<nn::MoeExperts> make_routed_experts(const ModelConfig& c, int64_t index, int64_t width,
                                                    nn::ParameterList& params) {
  // Under expert parallelism the rank holds its share of the experts; the router picks among all.
  const int64_t experts = c.moe.num_experts / c.moe.expert_parallel;
  if (layer_replacement(c, index, "mlp.experts", "Experts") == FusedModule::kGroupedExperts)
    return std::make_unique<nn::GroupedExperts>("mlp.experts", experts, c.hidden_size, width, params);
  return std::make_unique<nn::Experts>("mlp.experts", experts, c.hidden_size, width, c.hidden_act,
                                       c.moe.experts_implementation, params);
}

nn::TopKRouter make_topk_router(const ModelConfig& c, nn::TopKRouter::Options options, nn::ParameterList& params) {
  return nn::TopKRouter("mlp.gate", c.moe.num_experts, c.moe.num_experts_per_tok, c.hidden_size, options, params);
}

}  // namespace census
