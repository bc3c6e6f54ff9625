// File: pipeline_split.h
// Which decoder layers each model chunk of a pipeline holds, as Megatron-Core splits them
// (get_num_layers_to_build and get_transformer_layer_offset in megatron/core/transformer/
// transformer_layer.py and transformer_block.py).
//
// P stages of V model chunks each make P x V chunks; in model order, chunk g = v P + r is stage r's
// v-th chunk (V rounds over the stages). Three ways to size them:
//   even                      every chunk L / (P V) layers
//   first/last stage layers   Megatron's num_layers_in_first_pipeline_stage F and
//                             num_layers_in_last_pipeline_stage La: stage 0 holds F, the last stage La,
//                             every other stage an equal share of the rest; each stage's layers split
//                             evenly over its V chunks (F, La and the share divisible by V)
//   embedding / loss as layers  account_for_embedding_in_pipeline_split and _loss_: the embedding (the
//                             loss) counts as one layer, so (L + 1 [+ 1]) / (P V) a chunk, the model's first
//                             chunk (its last) holding one decoder layer fewer
// The two uneven ways exclude each other, as in Megatron. A chunk left without a decoder layer is
// refused. The stage that holds the embedding is stage 0's first chunk; the loss, the last stage's last.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/result.h"

namespace census {

struct PipelineSplit {
  int64_t first_stage_layers = 0;  // F; 0: not set
  int64_t last_stage_layers = 0;   // La; 0: not set
  bool embedding_as_layer = false;
  bool loss_as_layer = false;

  bool even() const { return first_stage_layers == 0 && last_stage_layers == 0 && !embedding_as_layer && !loss_as_layer; }
  bool operator==(const PipelineSplit&) const = default;
};

struct LayerRange {
  int64_t begin = 0;  // decoder layers [begin, end)
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};

// The P x V chunks' layers in model order (chunk v P + r is stage r's v-th), or why the split cannot
// be made (the flags named as census step takes them).
Result<std::vector<LayerRange>> pipeline_chunks(int64_t layers, int64_t stages, int64_t virtual_stages,
                                                const PipelineSplit& split);

// "F 7, La 6", "embedding and loss as layers", or "even": the split as the step's header names it.
std::string split_name(const PipelineSplit& split);

}  // namespace census
