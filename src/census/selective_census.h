// File: selective_census.h
// The census of a layer under HyperParallel's selective activation checkpointing, as its trainer wraps
// each layer (autograd/checkpoint.h): what the layer keeps (its input and the outputs the policy
// saves; the positions the model embeds once for all layers are shared, not the layer's), the most its
// backward holds with the recompute, and the shares of matmul FLOPs the backward runs again.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "models/config.h"
#include "ops/dispatch.h"

namespace census {

struct SelectiveCensus {
  int64_t kept_bytes = 0;
  int64_t working_bytes = 0;

  // With explain: what the layer keeps (its input, then each output the policy cached, largest
  // first), and the forward's other ops, which the backward runs again up to the last one that saves.
  struct Kept {
    std::string what;  // "input", or the aten op that made it
    std::string module;
    Dims shape;
    std::string dtype;
    int64_t bytes;
  };
  struct Recomputed {
    std::string aten_op;
    int64_t calls;
    int64_t bytes;  // of their outputs, in the forward
  };
  std::vector<Kept> kept;
  std::vector<Recomputed> recomputed;
};

SelectiveCensus census_selective(const ModelConfig& config, int64_t layer_index, int64_t seq_length,
                                 bool explain = false);

// The share of the attention projections' matmul FLOPs, and of the rest of the layer's, that the
// policy leaves to the backward to run again.
struct RecomputeShares {
  double attention_mm = 0;
  double ffn_mm = 0;
};

// The ledger of the recompute shares: the FLOPs of the matmuls a checkpointed region's forward runs
// (the catalogue's rule), by part (an attention parameter among the inputs, or not) and by the
// policy's decision, [saved, recomputed], as each call carries it.
class RecomputeLedger final : public Observer {
 public:
  explicit RecomputeLedger(std::vector<int64_t> attention_parameters)
      : Observer(kOnOp), attention_parameters_(std::move(attention_parameters)) {}
  void on_op(const OpCall& call) override;
  // A matmul of the region, with the policy's decision for it (`saved`, else recomputed).
  void count(const OpCall& call, bool saved);

  std::array<int64_t, 2> attention_flops{};
  std::array<int64_t, 2> rest_flops{};

 private:
  std::vector<int64_t> attention_parameters_;  // storage ids
};

RecomputeShares census_recomputed(const ModelConfig& config, int64_t layer_index, int64_t seq_length);
// census_recomputed of every decoder layer, each run in the model's forward (models/causal_lm.h: the
// model from `config`, its layers from `layer_config`) under the selective checkpoint as the step wraps
// it: the shares of a layer that cannot run alone (Family::stack_only), by layer index. Where the
// family's layers are alike by kind (Family::stack_layers_alike_by_kind), read off the forward as far as
// each kind's first layer, every later layer taking its kind's (`whole`: every layer's own).
std::vector<RecomputeShares> census_stack_recomputed(const ModelConfig& config, const ModelConfig& layer_config,
                                                     int64_t seq_length, bool whole = false);

// The ledger's attention parameters: those of the layer's child named for its attention (self_attn,
// attention, ...), by storage id.
std::vector<int64_t> attention_parameter_ids(const DecoderLayer& layer);
// Whether the config builds the layer as census_recomputed prices it (the eager delta rule, no
// replacements), so that the shares may be read off the forward of the layer as it is built.
bool recompute_prices_as_built(const ModelConfig& config);
RecomputeShares shares_of(const RecomputeLedger& ledger);

// census_selective's kept_bytes from the forward alone, without the backward it does not depend on
// (what census activations needs: most of the work is the recompute and the backward). With `shares`,
// also census_recomputed's answer, read off the same forward where the config builds the layer as
// census_recomputed does (the eager delta rule, no replacements), else from its own run.
int64_t census_selective_kept(const ModelConfig& config, int64_t layer_index, int64_t seq_length,
                              RecomputeShares* shares = nullptr);

// census_selective_kept's answer where the plain census's forward read it (`reading`, from census_layer),
// else census_selective_kept's own run; `shares` likewise.
struct SelectiveReading;
int64_t selective_kept(const ModelConfig& config, int64_t layer_index, int64_t seq_length,
                       const SelectiveReading& reading, RecomputeShares* shares = nullptr);

}  // namespace census
