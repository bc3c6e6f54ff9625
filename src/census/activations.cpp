#include "census/activations.h"

#include <algorithm>

#include "census/selective_census.h"
#include "census/selective_reading.h"
#include "census/stack_census.h"

namespace census {
namespace {

// The split of a TP-1 / TP-2 pair of byte counts, per token.
std::pair<double, double> split(int64_t one, int64_t two, int64_t seq_length) {
  const double s = static_cast<double>(seq_length);
  return {std::max(0.0, 2.0 * static_cast<double>(two) - static_cast<double>(one)) / s,
          std::max(0.0, 2.0 * static_cast<double>(one - two)) / s};
}

}  // namespace

KindActivations split_record(int64_t saved_1, int64_t saved_2, int64_t working_1, int64_t working_2,
                             int64_t seq_length, int64_t micro_batch_size) {
  KindActivations k;
  k.seq_length = seq_length;
  const int64_t tokens = seq_length * micro_batch_size;
  std::tie(k.saved, k.saved_tp) = split(saved_1, saved_2, tokens);
  std::tie(k.working, k.working_tp) = split(working_1, working_2, tokens);
  return k;
}

KindActivations kind_activations(const LayerCensus& tp1, const LayerCensus& tp2, int64_t seq_length,
                                 int64_t micro_batch_size) {
  KindActivations k = split_record(tp1.saved_bytes, tp2.saved_bytes, tp1.working_bytes, tp2.working_bytes, seq_length,
                                   micro_batch_size);
  for (size_t i = 0; i < kSavedOpCount; ++i) {
    if (tp1.saved_by_op[i] == 0) continue;
    const std::string name(saved_op_name(static_cast<SavedOp>(i)));
    std::tie(k.ops[name], k.ops_tp[name]) = split(tp1.saved_by_op[i], tp2.saved_by_op[i], seq_length * micro_batch_size);
  }
  return k;
}

std::vector<std::pair<std::string, KindActivations>> census_activations(const ModelConfig& config,
                                                                         int64_t seq_length,
                                                                         const std::vector<LayerGroup>& stack) {
  std::vector<std::pair<std::string, KindActivations>> out;
  int64_t first_layer = 0;
  const ModelConfig tp2 = tp_config(config, 2);
  // The records of a kind whose first layer cannot run alone (Family::stack_only): from the stack,
  // measured once.
  std::vector<std::pair<std::string, KindActivations>> stacked;
  for (const LayerGroup& group : stack.empty() ? layer_stack(config) : stack) {
    if (group.mtp) continue;
    const bool seen = std::any_of(out.begin(), out.end(), [&](const auto& kind) { return kind.first == group.kind; });
    const bool alone = config.family->stack_only == nullptr || first_layer >= config.num_hidden_layers ||
                       config.family->stack_only(config, first_layer) == nullptr;
    if (!seen && !alone) {
      if (stacked.empty()) stacked = stack_activations(config, seq_length);
      const std::string model_kind = layer_kind(config, first_layer);
      for (const auto& [kind, record] : stacked)
        if (kind == model_kind) out.emplace_back(group.kind, record);
    } else if (!seen) {
      // The selective census's kept bytes are read off the same forwards where they can be.
      SelectiveReading read_one, read_two;
      read_one.wants_shares = true;
      const LayerCensus one = census_layer(config, first_layer, seq_length, /*explain=*/false, &read_one);
      const LayerCensus two = census_layer(tp2, first_layer, seq_length, /*explain=*/false, &read_two);
      KindActivations record = kind_activations(one, two, seq_length, config.micro_batch_size);
      RecomputeShares shares;
      const int64_t kept_one = selective_kept(config, first_layer, seq_length, read_one, &shares);
      const int64_t kept_two = selective_kept(tp2, first_layer, seq_length, read_two);
      const auto [selective, selective_tp] = split(kept_one, kept_two, seq_length * config.micro_batch_size);
      record.selective = selective;
      record.selective_tp = selective_tp;
      record.selective_attention_mm = shares.attention_mm;
      record.selective_ffn_mm = shares.ffn_mm;
      out.emplace_back(group.kind, std::move(record));
    }
    first_layer += group.count;
  }
  return out;
}

}  // namespace census
