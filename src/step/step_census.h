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
#include "nn/loss.h"
#include "util/result.h"

namespace census {

// The most micro-batches a step accumulates, model chunks counted (M x V under the interleaved
// schedule): 2^12. Each is a forward and a backward the step replays and two phases it reports, so its
// time, memory and answer grow with them (4096 take Llama-3.1-8B's step about a second and 120 MB; 2^16
// took 17 s and 2 GB). Llama 3.1's batches of 2048 sequences run on one data-parallel rank within it.
inline constexpr int64_t kLargestMicroBatches = int64_t{1} << 12;
// The most sequences a micro-batch holds (--micro-batch-size): 2^16. Its B x S tokens run the ops a
// sequence's do, so their counts are weighed as a sequence of B x S tokens' (cli/request.h).
inline constexpr int64_t kLargestMicroBatchSize = int64_t{1} << 16;
// The largest parallel degree (TP, CP, EP, DP, PP, a plan's devices): 2^20 ranks, more than any run
// has. PP and V are bounded below it by the layers they divide.
inline constexpr int64_t kLargestDegree = int64_t{1} << 20;

enum class PipelineSchedule : uint8_t { k1F1B, kGPipe, kInterleaved };

struct StepOptions {
  int64_t seq_length = 4096;
  int64_t micro_batch_size = 1;  // sequences a micro-batch: input ids (B, S)
  int64_t micro_batches = 1;
  int64_t pipeline_stages = 1;
  int64_t stage = 0;
  PipelineSchedule schedule = PipelineSchedule::k1F1B;
  int64_t virtual_stages = 1;  // model chunks per stage (interleaved)
  PipelineSplit split;         // how many layers each chunk holds (step/pipeline_split.h); even by default
  Recompute recompute = Recompute::kNone;
  // The layers of these kinds (layer_kind) under their own mode instead (step/recompute_choice.h).
  std::vector<std::pair<std::string, Recompute>> recompute_by_kind;
  // torchtitan-layer:N: every N-th decoder layer of the stage (counted from 1) under full checkpointing,
  // the rest under none; 0: off (step/recompute_choice.h).
  int64_t recompute_every_nth_layer = 0;
  StepOptimizer optimizer = StepOptimizer::kNone;  // step/optimizer_choice.h
  // The optimizer's form (foreach, fused, for-loop); empty: the one PyTorch runs on CUDA by default.
  std::optional<nn::OptimizerImpl> optimizer_impl;
  // torchtune's optimizer_in_bwd (training/memory.py's register_optim_in_bwd_hooks): one optimizer a
  // parameter, stepped and zero_grad()-ed in the parameter's post-accumulate-grad hook, inside the
  // backward, so a gradient lives from its accumulation to its step and no longer. One micro-batch.
  bool optimizer_in_backward = false;
  // The loss the trainer computes from the last hidden state (nn/loss.h): Transformers' own, or TRL's
  // chunked loss, which replaces the model's head and loss.
  nn::CausalLMLoss loss = nn::CausalLMLoss::kForCausalLM;
  // The step a run is judged by is its second and every later one (the default): the optimizer's states,
  // made by the first step, alive from the start, and the gradients as zero_grad(set_to_none=True) left
  // them (none). first_step: the first, whose optimizer makes its states inside its step.
  bool first_step = false;
  // Activation offloading (autograd/offload_activations.h), TRL's (SFTConfig.activation_offloading: the
  // context around each micro-batch's forward, loss and backward) or torchtune's (its recipes': around
  // the model's forward); the LM head's saves kept either way. Empty: none.
  std::optional<OffloadPolicy> offload_activations;
  // torchao's FP8 training, as torchtitan converts the model (nn/float8_training.h): the recipe its
  // Float8Linears run, eager; none: bf16.
  std::optional<ops::Float8Recipe> fp8;
  bool fp8_skip_head = false;  // the LM head left bf16 (torchtitan's filter_fqns=["output"])
  // The rank's layers as tp_config holds them; the embedding, final norm, LM head and loss whole. With
  // sequence_parallel or loss_parallel, DTensor's plan instead (step/tensor_parallel.h): the embedding
  // and head vocabulary-parallel, the collectives run on the rank, the norms on S / T tokens under SP.
  int64_t tensor_parallel = 1;
  bool sequence_parallel = false;
  bool loss_parallel = false;
  StepComposition composition;  // composed onto the simulated step (step/step_compose.h)
  // Context parallelism: the rank runs seq_length / C of each sequence's tokens; the K/V of the other
  // C - 1 shards, which its ring attention receives, composed (step/step_compose.h).
  int64_t context_parallel = 1;
  // Expert parallelism: each MoE layer holds num_experts / E of the experts (the router whole), its
  // experts running every token-expert pair of the rank's tokens as Transformers' plan does.
  int64_t expert_parallel = 1;
  // The experts' tensor-parallel degree (Megatron's expert_tensor_parallel_size): 0, the TP degree (the
  // experts' width divided as tp_config divides moe_intermediate_size), or 1 (every rank's experts whole).
  int64_t expert_tensor_parallel = 0;
  // FSDP2 (fully_shard per decoder layer and the root) over `fsdp.shards` data-parallel ranks, run on
  // the rank (step/fsdp.h); shards 1: off.
  FsdpPolicy fsdp;
  // Further compositions the same simulated step is reweighed by (StepCensus::also_composed_peaks):
  // a planner trying several ZeRO stages or master-weight choices over one simulation.
  std::vector<StepComposition> also_composed;
  // PyTorch's caching allocator run over the step's device allocations (step/step_alloc.h): for the
  // step as composed, and for each of also_composed.
  std::optional<StepAllocatorOptions> allocator;
  // Whether the analyses list what is live at their peak by op (StepAnalysis::peak_other_by_op), which
  // only --explain prints: a planner reading peaks alone leaves it out.
  bool peak_holders = true;
  // A planner reads also_composed's peaks (and allocators) alone: the step's own analysis, composed
  // analysis and allocator are left out (their fields empty), but where an also_composed entry composes
  // nothing and so is the step's own analysis.
  bool also_composed_only = false;
};

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
