// Every shipped config's layer kinds, each by its first layer, as one tensor-parallel rank of TP 1 and
// of TP 2 holds it: for the tests that check a census against another on every shipped model.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "cli/request.h"
#include "cli/shipped_models.h"
#include "models/registry.h"

namespace census::testing {

// Whether layer `index` can be censused alone (a DeepSeek-V4 layer cannot: it runs only inside its
// model's forward, and is priced through the stack).
inline bool runs_alone(const ModelConfig& config, int64_t index) {
  return config.family->stack_only == nullptr || config.family->stack_only(config, index) == nullptr;
}

// visit(rank config, layer index, "model layer L TP t"), for every kind's first layer that runs alone
template <class Visit>
void for_each_shipped_layer_kind(Visit&& visit) {
  for (const cli::ShippedModel& model : cli::shipped_models()) {
    const ModelConfig config = cli::resolve_model(std::string(model.name)).take();
    for (int64_t tp : {1, 2}) {
      const ModelConfig rank = tp_config(config, tp);
      int64_t first = 0;
      std::vector<std::string> seen;
      for (const LayerGroup& group : layer_stack(rank)) {
        if (!group.mtp && runs_alone(rank, first) && std::find(seen.begin(), seen.end(), group.kind) == seen.end()) {
          seen.push_back(group.kind);
          visit(rank, first, std::string(model.name) + " layer " + std::to_string(first) + " TP " + std::to_string(tp));
        }
        first += group.count;
      }
    }
  }
}

}  // namespace census::testing
