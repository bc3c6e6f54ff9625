// File: plan_time.h
// The step-time estimate `census plan` ranks layouts by, term by term. Every term is the busiest pipeline
// stage's, over the step's M micro-batches, unless it says otherwise:
//
//   forward, backward     the stage's layers' ops priced by plan/plan_cost.h (GEMMs on the saturation
//                         curve, the attention kernel at its own rates, the rest memory-bound); the
//                         embedding on the first stage
//   recompute             full: each layer's forward again (with its collectives); selective: what the
//                         policy runs again (its share of the matmuls, the weightless ops), per layer kind
//   output_layer          the last stage's final norm, LM head and loss, forward and backward (under
//                         sequence parallelism the vocabulary-parallel head and loss: the rank's V / T rows)
//   tp_communication      per layer 2 all-reduces of the hidden states forward, 2 backward (inside a node);
//                         under sequence parallelism an all-gather and a reduce-scatter for each (the same
//                         bytes on the ring); tp_async hides them behind the layer's GEMMs where those take
//                         longer. The layers are the step's rank's (DTensor's plan's under SP), their norms
//                         priced on all S tokens
//   cp_communication      per attention layer the ring's C - 1 steps, each sending a K/V shard (its
//                         gradient too, backward) while the kernel works on the one it holds: only what a
//                         step's send takes beyond the step's attention is exposed (the math allows no more
//                         overlap: a step needs the shard the last one sent)
//   ep_communication      per MoE layer 2 all-to-alls forward (dispatch, combine), 2 backward, of the rank's
//                         b S/C x top-k hidden states, over the EP group (across nodes where it spans them);
//                         ep_1f1b hides a pass's all-to-alls behind the compute of the pass it is paired
//                         with in 1F1B (Megatron's overlap of one micro-batch's all-to-all with another's compute)
//   fsdp_communication    ZeRO-3 and FSDP: each layer's parameters gathered forward and backward and its
//                         gradients reduce-scattered backward, every micro-batch; fsdp_prefetch gathers a
//                         layer while the one before computes, so only what outlasts it is exposed
//   pipeline_bubble       the makespan of the schedule's own order (plan/plan_pipeline.h), each pass as
//                         long as the terms above make it, hidden states sent between stages, less the
//                         busiest stage's work
//   dp_communication      once a step: ZeRO-0 all-reduces the gradients, ZeRO-1/2 reduce-scatter them and
//                         all-gather the updated parameters (the dense over DP x CP, an expert's over
//                         DP x CP / EP); dp_reduce_scatter overlaps the gradients' reduction with the last
//                         micro-batch's backward, bar its last layer's
//   optimizer_step        parameters, gradients and states read and written at the rank's shares / HBM
//
// Overlap switches, each named (--overlap): fsdp_prefetch and dp_reduce_scatter on by default (FSDP2 and
// Megatron's distributed optimizer do them unasked), tp_async and ep_1f1b off (each a framework option).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "models/config.h"
#include "plan/plan_cost.h"
#include "plan/plan_device.h"
#include "plan/plan_layout.h"
#include "plan/plan_pipeline.h"

namespace census {

enum class Overlap : uint8_t { kFsdpPrefetch, kTpAsync, kEp1F1B, kDpReduceScatter, kCount };
constexpr size_t kOverlaps = static_cast<size_t>(Overlap::kCount);

struct Overlaps {
  std::array<bool, kOverlaps> on = {true, false, false, true};
  bool operator[](Overlap o) const { return on[static_cast<size_t>(o)]; }
};

std::string overlap_name(Overlap overlap);
// "fsdp_prefetch,tp_async" (the switches on), "none" (none on); refused for an unknown switch.
Result<Overlaps> parse_overlaps(const std::string& text);
std::string overlaps_text(const Overlaps& overlaps);

// A term of the step-time estimate.
struct TimeTerm {
  std::string name;
  double seconds;
  std::string formula;
};

struct TimeEstimate {
  double seconds = 0;          // the sum of the terms
  std::vector<TimeTerm> terms;
  // What each overlap switch hides on this layout (on: hidden; off: would hide), in seconds.
  std::array<double, kOverlaps> overlap_seconds{};
  int64_t busiest_stage = 0;
  bool complete = false;       // false: a lower bound, the pipeline's bubble not simulated
  // Each stage's parameters on the rank (its layers' at the rank's TP and EP share, the embedding's, the
  // head's and the final norm's).
  std::vector<int64_t> stage_parameters;
  // Each stage's largest decoder layer's parameters (ZeRO-3's gathered unit, as the step builds them).
  std::vector<int64_t> stage_largest_layer_parameters;
  // Each chunk's, by chunk g (stage g % P's chunk g / P): with the routed experts' and the untrained.
  std::vector<ChunkParameters> chunk_parameters;
};

// What the estimate prices beyond the layout: the options of the run.
struct TimeOptions {
  Overlaps overlaps;
  bool fp32_master_weights = false;
  bool fp32_gradients = false;
};

// The estimate of any layout of one model on one run, its layer costs recorded once per (layer kind, TP,
// EP, tokens) and reused.
class TimeModel {
 public:
  TimeModel(const ModelConfig& config, const RunShape& run, const Device& device, TimeOptions options);
  ~TimeModel();
  // The estimate; `complete` false leaves the bubble out (a lower bound of the complete estimate);
  // `formulas` writes each term's formula (what --explain prints).
  TimeEstimate estimate(const Layout& layout, bool complete, bool formulas = false);
  // A lower bound of every incomplete estimate of `layout` under any recompute choice and ZeRO stage
  // (those add work, or move it between terms no faster).
  double shape_bound(const Layout& layout);
  // A lower bound of shape_bound(layout) read off its layers' costs alone, without a pass through its
  // stages (Note [The shape's floor]): what the search ranks a shape by until it nears the front.
  double shape_floor(const Layout& layout);
  // Records ahead, one a core, what the estimates of `layouts` will read: the model's forwards where a
  // layer cannot run alone (Note [Stack records made ahead]), else each kind's lone layer (Note [Layer
  // records made ahead]): the same costs, made in parallel.
  void record_ahead(const std::vector<Layout>& layouts);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace census
