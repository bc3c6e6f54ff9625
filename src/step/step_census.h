// File: step_census.h
// One rank's whole training step, simulated op by op through the engine: the model as Transformers'
// AutoModelForCausalLM builds it, as its family writes it (models/causal_lm.h: the token embedding, the
// stage's decoder layers, the final norm, the LM head and the causal-LM loss), M micro-batches in the pipeline schedule's order, gradients
// accumulated in .grad, then AdamW's step and zero_grad(set_to_none=True). Every storage is counted,
// parameters included (step/step_bytes.h); the answer is the step's peak, where it falls, and its split
// into parameters, gradients, optimizer states and the rest.
//
// Which step: the steady state, every step from the second on, is the default. AdamW makes its states
// lazily inside the first step(), so from the second step on they are alive through every forward and
// backward: the step's setup makes them (nn::AdamW::make_states), after the parameters and buffers,
// as the steady-state oracle finds them there; a parameter the backward gives no gradient has none
// (taken back once the backward shows it: StepBytes::retract). StepOptions::first_step prices the
// first step instead, whose optimizer step makes them.
//
// What one micro-batch runs (each graph alive until its backward):
//   forward   labels = randint (B, S) (last stage); input_ids = randint (B, S) (first stage), else a
//             received hidden state x (B, S, H), a bf16 leaf requiring grad; the family's model forward
//             with the stage's layers (plain, or each under selective or full checkpointing); last
//             stage: the logits and the loss, the model's output (its bf16 logits) dropped, the loss
//             divided by M where M > 1. A stage that is not last keeps its output.
//   backward  last stage: loss.backward(); else out.backward(g), g a received gradient of out's
//             shape; a middle stage's x.grad is the gradient it sends, dropped with x.
// Schedules (the order of (pass, micro-batch) is the only thing a schedule changes):
//   1f1b   stage r of P: warm-up min(P - r - 1, M) forwards, then M - warm-up steady pairs (the next
//          forward, then the oldest backward), then the cool-down backwards
//   gpipe  every forward, then every backward in the same order
//   interleaved  Megatron's interleaved 1F1B over V model chunks per stage (chunk v of stage r holds
//          the (v P + r)-th run of L / (P V) layers): virtual micro-batch k of M V is micro-batch
//          (k / (P V)) P + k % P through chunk (k % (P V)) / P (a backward's chunk counted from the
//          last); warm-up min(M V, 2 (P - r - 1) + (V - 1) P) forwards (all of them where M = P),
//          then forward k + warm-up, backward k pairs, then the cool-down backwards
// One stage and M = 1 with no pipeline is the plain step: F0 B0 (F1 B1 ... for M > 1).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "step/step_alloc.h"
#include "step/step_options.h"
#include "autograd/offload_activations.h"
#include "ops/ops.h"
#include "step/optimizer_choice.h"
#include "step/pipeline_split.h"
#include "step/recompute_choice.h"
#include "step/step_bytes.h"
#include "step/step_compose.h"
#include "step/fsdp.h"
#include "step/tensor_parallel.h"
#include "models/config.h"
#include "nn/lora.h"
#include "nn/loss.h"
#include "util/result.h"

namespace census {


struct StepPass {
  char pass;  // 'F' or 'B'
  int64_t micro_batch;
  int64_t chunk = 0;  // the stage's model chunk (interleaved)
};

// The order stage `stage` of `stages` runs its micro-batches' passes in.
std::vector<StepPass> pipeline_order(PipelineSchedule schedule, int64_t stages, int64_t stage, int64_t micro_batches,
                                     int64_t virtual_stages = 1);

struct StepCensus {
  StepAnalysis analysis;
  std::vector<std::string> schedule;  // "F0", "B0", ...
  int64_t first_layer = 0;            // the stage's layers [first_layer, end_layer) (its first and last chunk's)
  int64_t end_layer = 0;
  std::vector<LayerRange> chunks;     // each of its model chunks' layers
  int64_t parameter_count = 0;
  int64_t parameter_tensors = 0;
  int64_t parameter_bytes = 0;
  int64_t buffer_bytes = 0;
  // Under LoRA: the adapted Linears, and the parameters that train (the adapters) and those frozen.
  int64_t adapted_linears = 0;
  int64_t trainable_parameter_count = 0;
  int64_t trainable_parameter_bytes = 0;
  // Under a 4-bit base: the Linears quantized, their packed weights' bytes (of parameter_bytes), and their
  // quantization state's (of buffer_bytes).
  int64_t quantized_linears = 0;
  int64_t quantized_weight_bytes = 0;
  int64_t quantization_state_bytes = 0;
  int64_t optimizer_state_bytes = 0;        // 0 without an optimizer
  // Of those, the states held in unified memory outside the caching allocator (PagedAdamW8bit's paged
  // states): in no device figure.
  int64_t optimizer_unified_memory_bytes = 0;
  int64_t gradient_bytes_after_first_backward = 0;
  int64_t gradient_bytes_after_last_backward = 0;
  int64_t gradient_bytes_at_end = 0;
  // The highest phase peak among the forwards, the backwards and the optimizer step (absent: -1 bytes).
  StepMoment forward_peak;
  StepMoment backward_peak;
  StepMoment optimizer_step_peak;
  // With a composition: the step reweighed by it, and its peak (the highest phase peak), before the
  // user's overheads.
  StepAnalysis composed;
  StepMoment composed_peak;
  StepComposition composition;  // as the step applied it: its gathered sizes set
  int64_t largest_layer_parameter_bytes = 0;
  // Where activations are offloaded: the pinned host memory they take, and what the packs did.
  std::optional<HostMemory> host;
  // Under FSDP2's CPUOffloadPolicy: the host's side of the step (the shards, their gradients, the
  // optimizer's states and its step), in no device figure.
  std::optional<StepHostAnalysis> offloaded_to_host;
  OffloadCounts offload;
  int64_t passes_replayed = 0;  // passes replayed rather than run through the engine
  // One per StepOptions::also_composed, in its order: the step's peak under that composition (the
  // highest phase peak of the reweighed step, as composed_peak; the simulated peak where it composes
  // nothing), before the user's overheads.
  std::vector<StepMoment> also_composed_peaks;
  // Where StepOptions::allocator asks: the allocator over the step (as composed), and over each
  // also_composed composition in its order.
  std::optional<StepAllocatorCensus> allocator;
  std::vector<StepAllocatorCensus> also_composed_allocators;
};

// The config as one rank builds its layers: tp_config's heads and widths (the experts' whole where the
// experts' TP degree is 1), its num_experts / EP experts.
ModelConfig rank_config(const ModelConfig& config, int64_t tensor_parallel, int64_t expert_parallel,
                        int64_t expert_tensor_parallel);
// The config the step's rank builds its decoder layers from: rank_config's, or under --sequence-parallel or
// --loss-parallel DTensor's plan's (dtensor_layer_config), its share of the experts.
ModelConfig rank_config(const ModelConfig& config, const StepOptions& options);

// The session a fine-tuned step builds its model in (StepOptions' lora, quantize and autocast): under
// adapters the base frozen; under prepare_model_for_kbit_training's casts, or the model loaded in fp32 for
// the Trainer's autocast, its bf16 parameters fp32 (the latter its dtype-less buffers too). What else
// builds the step's layers (the plan's time model) builds them so.
void set_fine_tuned_session(Session& session, const StepOptions& options);

// Refuse what the simulation cannot run: layers that the stages do not split as asked (pipeline_chunks), a
// recompute kind the model does not have, a model its family cannot
// cut where the stages would (Family::pipeline_refusal), a stage out of range, a sequence or micro-batch count below 1, a data-
// parallel degree below 1 or a ZeRO stage other than 0-3, tokens the context-parallel degree does not
// divide, experts the expert-parallel degree does not divide (or a model with none).
Status check_step_options(const ModelConfig& config, const StepOptions& options);

// Run the step (options checked first). Each chunk's first two micro-batches run through the engine;
// a later micro-batch's forward and backward are replays of the second's (step/step_bytes.h): the
// same events, the same answer, without the engine's work. Under FSDP2 in a pipeline every pass runs
// through the engine (a pass finds FSDP2's units as the schedule's other passes left them).
Result<StepCensus> census_step(const ModelConfig& config, const StepOptions& options);

// The same step with every pass run through the engine: what the replayed step is tested against.
Result<StepCensus> census_step_op_by_op(const ModelConfig& config, const StepOptions& options);

}  // namespace census
