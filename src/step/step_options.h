// File: step_options.h
// What one rank's training step runs (StepOptions): the tokens and micro-batches, the pipeline schedule, the
// recompute mode, the optimizer, the loss, the memory techniques, the adapters and the parallel layout, as
// census step's options set them. step/step_census.h runs it; each option's rules are checked there
// (check_step_options) and in the choice files beside it (step/lora_choice.h, ...).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "autograd/offload_activations.h"
#include "nn/linear4bit.h"
#include "nn/lora.h"
#include "nn/loss.h"
#include "ops/ops.h"
#include "run/run.h"
#include "step/fsdp.h"
#include "step/optimizer_choice.h"
#include "step/pipeline_split.h"
#include "step/recompute_choice.h"
#include "step/step_alloc.h"
#include "step/step_compose.h"

namespace census {

// The limits of a run's sizes (kLargestMicroBatches, kLargestMicroBatchSize, kLargestDegree) are the
// Run's (run/run.h).

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
  // PEFT's LoRA (nn/lora.h): the base frozen, the targeted Linears' adapters trained, the optimizer over
  // them alone (the Trainer's, over the parameters that require grad). Empty targets: the model type's
  // default (Family::lora_default_targets). None: every parameter trains.
  std::optional<nn::LoraConfig> lora;
  // bitsandbytes' 4-bit base (nn/linear4bit.h): every Linear but the head a frozen Linear4bit, as
  // BitsAndBytesConfig(load_in_4bit=True, ...) loads the model; with PEFT's prepare_model_for_kbit_training
  // where asked. Adapters train beside it. None: the base in bf16.
  std::optional<nn::Bnb4bitConfig> quantize;
  // The HF Trainer's bf16=True on a model loaded in fp32, as accelerate wraps its forward: every parameter
  // (and so its gradient and optimizer states) fp32; the forward and its loss inside torch.autocast("cuda",
  // dtype=torch.bfloat16) (ops/autocast.h), a checkpoint's recompute too; then convert_outputs_to_fp32's
  // fp32 copy of the logits, alive until the loss is taken from the output (step/autocast_choice.h).
  bool autocast = false;
  // The dtype the model is loaded in: none, the default (fp32 under autocast, else bf16); bf16 under autocast is
  // Transformers 5's dtype="auto" on a bf16 checkpoint: the products already bf16, the fp32 lists and the output
  // copy as they are.
  std::optional<DType> load_dtype;
  bool fp32_weights() const { return autocast && load_dtype.value_or(DType::kFloat32) == DType::kFloat32; }
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

// The first option that shards or splits the rank's model across others (--tp, --pp, --cp, --ep, --zero
// over more than one rank), as a refusal names it; nullptr where none does.
const char* sharding_flag(const StepOptions& options);
// The same, or --fsdp or --dp over more than one rank: the first option that makes the step one rank's of
// many; nullptr for one rank's whole model.
const char* layout_flag(const StepOptions& options);

}  // namespace census
