// File: plan_memory.h
// What the plan knows of a layout's peak before simulating its step: two lower bounds, each a moment
// the step reaches, so a layout whose bound passes the memory cannot fit and is rejected unsimulated.
//
//   states        the end of AdamW's step: parameters, gradients and optimizer states all live, at the
//                 layout's ZeRO shares over DP x CP (FSDP2's at ZeRO-3's: its fp32 shards and gradients
//                 under mixed precision hold 4 + 4 + 8 B a parameter, the 2 + 2 + 12 B counted) (eager experts counted as parameters alone: an expert
//                 no token reached has neither gradient nor state; grouped_mm's have both whatever the
//                 routing; a parameter no gradient reaches, as parameters alone: Note [Parameters no
//                 gradient reaches] in plan/plan_cost.cpp), on the first and last stages with the
//                 two temporaries AdamW's update of the embedding's or head's table holds (Note
//                 [AdamW's temporaries in the states' bound]), on the stage holding the most
//   activations   the start of each of a stage's backwards: its parameters (at the ZeRO-3 share) and every
//                 micro-batch forward the schedule ran before it, each keeping at least what each of its
//                 layers keeps from its forward (layer_kept_bytes: the same ops on the same shapes, as
//                 the step's recompute mode wraps the layer, with its input where it keeps it: Note [A
//                 layer's input in the memory bound]), on the stage where that is most; where a
//                 layer cannot run alone, unpipelined, every layer's from the model's forward
//                 (stack_kept_bytes), pipelined, nothing for such a layer; on the last stage, that
//                 and what its final norm, head and loss hold at the most of that backward, which
//                 runs before any layer's (head_backward_bytes), where the family can cut the model
//                 there; or, on any stage, where it is more, what a layer of the chunk the
//                 backward runs holds at the most of its backward in place of its and the later
//                 layers' kept bytes (layer_backward_bytes; Note [A layer's backward in the memory
//                 bound]), but under DTensor's plan, or where a layer cannot run alone, but unpipelined
//                 with layers alike by kind (Note [A layer's backward inside the model]); under ZeRO-3
//                 (not FSDP2, whose hooks unshard its units), the gathered layer and the prefetched one
//                 the step composes during every pass (2 x the stage's largest layer's parameters, at 2 B
//                 each); under sequence parallelism each layer as DTensor's plan runs it and 1 / T of
//                 the head's (Note [Sequence parallelism in the activations' bound]); and each of those
//                 moments at every backward of the stage, as its passes run (pipeline_order): the
//                 forwards then in flight, and the gradients of the chunks a backward before it ran
//                 (Note [Every backward in the memory bound])
// Both leave out what they cannot price without the step (buffers, inputs, the model's own modules'
// activations, composed terms), so each is at most the simulated peak: tests/cli/plan_search_cli_test.cpp
// holds every bound of a whole search to its simulated peak.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "models/config.h"
#include "plan/plan_layout.h"

namespace census {

// Note [Stages a 1F1B pipeline need not simulate]
// Under 1F1B, a middle stage r (neither the first nor the last) runs min(P - r - 1, M) warm-up forwards,
// then forward-backward pairs, then the cool-down backwards; a later stage r' of the same layer kinds in
// the same order runs the same passes (the same events: the step replays them) with fewer warm-up
// forwards. Where every stage has two pairs or more (M >= P + 1), each moment of r' has a moment of r
// with the same pass running, as many micro-batches in flight or more, and gradients live where r' has
// them: r' never holds more than r, under any composition (its shares weigh both alike). The plan
// simulates r and leaves r' out (its bytes unprinted); tests/cli/plan_search_cli_test.cpp simulates every
// stage of every layout of whole searches and holds each left-out stage to the one standing for it.
//
// For each stage of `layout`, the stage whose simulation stands for it (itself, where it is simulated).
std::vector<int64_t> standing_stages(const ModelConfig& config, const Layout& layout);

// Whether the step gives every routed expert's weights a gradient and optimizer states whatever the
// routing (Note [Experts' gradients in the states' bound]).
bool experts_always_trained(const ModelConfig& config);

class MemoryBound {
 public:
  MemoryBound(const ModelConfig& config, const RunShape& run, bool fp32_master_weights, bool fp32_gradients,
              int64_t overheads);
  // `chunk_parameters` by chunk, as the time model counts them (TimeEstimate::chunk_parameters).
  int64_t states(const Layout& layout, const std::vector<ChunkParameters>& chunk_parameters) const;
  // `stage_largest_layer` by stage: the most parameters one of its decoder layers holds. Where the bound
  // without the layers' own backwards (layer_backward_bytes, the costliest term to measure) already
  // passes `enough`, that looser bound is returned and `*whole` set false: enough to reject the layout.
  int64_t activations(const Layout& layout, const std::vector<ChunkParameters>& chunk_parameters,
                      const std::vector<int64_t>& stage_largest_layer, int64_t enough = INT64_MAX,
                      bool* whole = nullptr);

 private:
  int64_t kept(const Layout& layout, int64_t layer, Recompute mode);
  // What the last stage's head holds at the most of its first backward (head_backward_bytes).
  int64_t head_backward(const Layout& layout);
  // What layer `layer` holds at the most of its first backward (layer_backward_bytes) at the layout's
  // rank, tokens and micro-batch, without DTensor's plan (whose layers run other ops).
  int64_t backward(const Layout& layout, int64_t layer, Recompute mode);
  // Each stage's passes in the order the step runs them (pipeline_order): a forward of chunk c as c + 1,
  // a backward as -(c + 1).
  struct Passes {
    std::vector<std::vector<int32_t>> by_stage;
  };
  const Passes& passes(const Layout& layout);

  const ModelConfig& c_;
  RunShape run_;
  bool fp32_master_weights_, fp32_gradients_;
  int64_t overheads_;
  std::vector<std::string> kinds_;       // by layer index
  std::vector<int64_t> representative_;  // by layer index: the first layer of its kind
  std::map<std::tuple<int64_t, int64_t, int64_t>, ModelConfig> ranks_;  // by (TP, EP, ETP)
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int>, std::pair<int64_t, int64_t>> kept_;  // one, per more
  bool stacked_ = false;  // a layer cannot run alone: unpipelined, every layer's kept bytes from the stack
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, int>, std::vector<std::pair<int64_t, int64_t>>> stack_kept_;
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int, int64_t>, int64_t> backward_;  // + micro-batch
  std::map<std::tuple<int, int64_t, int64_t, int64_t>, Passes> passes_;
  std::vector<int64_t> kept_by_layer_, backward_by_layer_;  // activations' own, one layout's: -1 unknown
  // One layout's, by chunk: a forward's kept bytes, the gradients its backward makes, and the most its
  // layers' backwards hold beyond the chunk's kept bytes (-1: not asked yet)
  std::vector<int64_t> chunk_kept_, chunk_grads_, chunk_layers_backward_;
  std::vector<char> chunk_graded_;  // one stage's walk: by its chunk, whether its gradients are made
  std::map<std::pair<int64_t, int64_t>, int64_t> head_backward_;  // by (tokens, b)
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, bool, bool>, std::vector<LayerRange>> chunks_;
};

}  // namespace census
