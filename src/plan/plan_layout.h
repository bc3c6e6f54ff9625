// File: plan_layout.h
// A parallel layout of a training run, the rules it must keep, and the census step it runs:
//
//   TP x CP x PP x DP = N devices; EP taken from the expert layers' data-parallel ranks DP x CP
//   (Megatron's expert-model-parallel groups), and from the TP ranks too where the experts are whole
//   (expert TP 1); ranks placed TP innermost, then CP, DP, PP (Megatron's tp-cp-ep-dp-pp), so an EP group
//   spans TP x EP consecutive ranks (EP consecutive ones with whole experts)
//   a pipeline schedule (1F1B, GPipe, interleaved over V chunks a stage) and how its chunks split the
//   layers (step/pipeline_split.h)
//   a micro-batch of b sequences: M = B / (DP x b) micro-batches a step
//   a recompute mode, or one per layer kind (step/recompute_choice.h)
//   the data-parallel mode: ZeRO 0-3 over DP x CP (composed onto the step), or FSDP2 over DP, simulated
//   by census step (--fsdp, step/fsdp.h: fp32 shards under MixedPrecisionPolicy(bf16, fp32) with fp32
//   master weights, bf16 shards without)
//   the tensor-parallel mode: TP as tp_config splits the layers (the embedding, head and loss whole), or
//   DTensor's plan with sequence parallelism and the vocabulary-parallel loss, as torchtitan runs it
//   (--sequence-parallel --loss-parallel, step/tensor_parallel.h), on a family whose names it knows
//
// The rules (a layout that breaks one is never simulated): TP inside a node and dividing the heads and
// widths as tp_config splits them; CP dividing the sequence; EP dividing the experts and DP x CP (TP x DP
// x CP with whole experts); the
// chunks splitting the layers (pipeline_chunks) where the family can be cut there; DP dividing the global
// batch and b the per-rank batch; the interleaved schedule's M a multiple of PP; anything else
// census step refuses.
//
// `census plan --layout "tp=2,ep=32,pp=8,vpp=4,mbs=1,recompute=selective"` names one layout: keys tp cp
// ep pp vpp dp mbs recompute (and recompute.KIND for one kind) zero fsdp sp schedule, first / last for
// Megatron's first and last stages' layers, and etp (1 or TP). An omitted degree is 1, dp what remains of
// --gpus; where PP x V does not divide the layers, the split the search would choose (balanced_splits);
// where EP does not divide DP x CP but TP x DP x CP, whole experts (etp 1), as Megatron then runs them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/config.h"
#include "nn/loss.h"
#include "step/step_census.h"
#include "util/result.h"

namespace census {

struct Layout {
  int64_t tp = 1, cp = 1, ep = 1, pp = 1, dp = 1;
  // The experts' TP degree (Megatron's expert_tensor_parallel_size): 0, TP's (EP then from DP x CP), or 1,
  // every rank's experts whole (EP from TP x DP x CP).
  int64_t etp = 0;
  PipelineSchedule schedule = PipelineSchedule::k1F1B;
  int64_t virtual_stages = 1;
  PipelineSplit split;
  int64_t micro_batch_size = 1;  // b: sequences a micro-batch
  int64_t micro_batches = 1;     // M = B / (DP x b)
  RecomputeChoice recompute;
  int zero = 0;
  bool fsdp = false;  // FSDP2 over DP, as census step --fsdp simulates it
  bool sp = false;    // DTensor's TP plan with sequence parallelism and loss_parallel (TP > 1)
};

// The parameters one pipeline chunk holds on the rank (its layers' at the rank's TP and EP share, with
// the embedding, the head and the final norm where it holds them), and of them the routed experts' and
// those no gradient reaches (Note [Parameters no gradient reaches], plan/plan_cost.cpp).
struct ChunkParameters {
  int64_t all = 0, experts = 0, untrained = 0;
};

// What a layout is planned against: the run's size and shape.
struct RunShape {
  int64_t gpus = 0;
  int64_t gpus_per_node = 8;
  int64_t seq_length = 4096;
  int64_t global_batch = 0;  // sequences a step (B)
  // How every layout's step runs beside its degrees (census plan's --master-weights, --grad-dtype and
  // --reserved): census step takes FSDP2's dtypes from the first, and refuses FSDP2 beside fp32
  // gradients composed and FSDP2 and DTensor's plan beside the allocator.
  bool fp32_master_weights = false;
  bool fp32_gradients = false;
  bool allocator = false;
  // The optimizer, its form (where it has forms: step/optimizer_choice.h), and which step is priced
  // (census plan's --optimizer, --optimizer-impl and --first-step): AdamW's foreach form and the steady
  // state, every step from the second on, by default.
  StepOptimizer optimizer = StepOptimizer::kAdamW;
  nn::OptimizerImpl optimizer_impl = nn::OptimizerImpl::kForEach;
  bool first_step = false;
  // The trainer's loss (census plan's --loss, nn/loss.h): TRL's and Liger's are laid out only where
  // census step takes them (no TP, CP, ZeRO-3 or FSDP2 beside them).
  nn::CausalLMLoss loss = nn::CausalLMLoss::kForCausalLM;
  // Fine-tuning, as census step takes it (its --lora*, --quantize*, --autocast and --load-dtype;
  // StepOptions' fields of the same names): PEFT's adapters on a frozen base, bitsandbytes' 4-bit base, the
  // HF Trainer's autocast. census step prices them on one device's whole model.
  std::optional<nn::LoraConfig> lora;
  std::optional<nn::Bnb4bitConfig> quantize;
  bool autocast = false;
  std::optional<DType> load_dtype;
  bool fine_tuning() const { return lora || quantize || autocast; }
  // FSDP2's units in the layouts that shard with it (census step's --fsdp-wrap).
  FsdpWrap fsdp_wrap = FsdpWrap::kLayers;
};

// The ranks EP takes its degree from: the expert layers' data-parallel ones, DP x CP, and with whole
// experts (ETP 1) the TP ranks too.
inline int64_t expert_ranks(const Layout& l) { return (l.etp == 1 ? l.tp : 1) * l.dp * l.cp; }

// "1f1b", "interleaved V4", or "none" (no pipeline).
std::string schedule_name(PipelineSchedule schedule);
std::string schedule_label(const Layout& layout);
// The data-parallel mode as printed: "ZeRO-1", "FSDP".
std::string sharding_name(const Layout& layout);
// The tensor-parallel degree as printed: "4", or "4 SP" under sequence parallelism.
std::string tensor_parallel_name(const Layout& layout);

// The least state bytes `optimizer` keeps for a trained parameter whatever its size and shape, its
// blocks' maxima, small parameters' wider states and temporaries left out: AdamW's two bf16 moments 4;
// SGD's momentum, the two 8-bit states (paged or not) and Muon's bf16 momentum 2; the two 4-bit states
// 1; Adafactor's factored rows and columns, and no optimizer, 0. The bounds and the time model read it
// (Note [Other optimizers' states in the bounds]).
int64_t least_state_bytes(StepOptimizer optimizer);

// Why TP `tp` breaks a rule (inside a node, dividing the heads and widths), or empty.
std::string tensor_parallel_rule(const ModelConfig& config, const RunShape& run, int64_t tp);

// Why `layout` breaks a rule, as the rule's name (the plan counts layouts by it), or empty. `detail`
// (where given) gets the step's own refusal where the step refuses it.
std::string layout_rule_broken(const ModelConfig& config, const RunShape& run, const Layout& layout,
                               std::string* detail = nullptr);

// The splits the search tries for P stages of V chunks: the even one; the embedding and the loss each
// counted as a layer (Megatron's account_for_*_in_pipeline_split); and where neither splits the layers,
// the first and last stages' layers (Megatron's num_layers_in_first/last_pipeline_stage) that balance
// the stages best with the embedding and the loss each counted as a layer. Empty where none does.
std::vector<PipelineSplit> balanced_splits(int64_t layers, int64_t stages, int64_t virtual_stages);

// The census step of stage `stage` of `layout` (its composition without the user's overheads; under
// run.allocator, the allocator's default options).
StepOptions layout_step_options(const Layout& layout, const RunShape& run, int64_t stage);

// `census plan --layout TEXT`: one layout, refused (one line naming the key) for an unknown key, a value
// that is not one, a degree that does not divide, or degrees whose product is not --gpus.
Result<Layout> parse_layout(const ModelConfig& config, const RunShape& run, const std::string& text);

}  // namespace census
