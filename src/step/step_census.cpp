#include "step/step_census.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>

#include "autograd/checkpoint.h"
#include "autograd/engine.h"
#include "census/stack_census.h"
#include "models/causal_lm.h"
#include "nn/float8_training.h"
#include "ops/autocast.h"
#include "ops/ops.h"
#include "step/autocast_choice.h"
#include "step/lora_choice.h"
#include "step/quantize_choice.h"

namespace census {

std::vector<StepPass> pipeline_order(PipelineSchedule schedule, int64_t stages, int64_t stage, int64_t micro_batches,
                                     int64_t virtual_stages) {
  std::vector<StepPass> order;
  if (schedule == PipelineSchedule::kInterleaved) {
    // Megatron's interleaved 1F1B: virtual micro-batch k (of M * V) is micro-batch
    // (k / (P V)) P + k % P through chunk (k % (P V)) / P, the backwards' chunks counted from the
    // last; warm-up 2 (P - r - 1) + (V - 1) P forwards (every one where M = P), then pairs.
    const int64_t p = stages, v = virtual_stages, total = micro_batches * v;
    auto pass = [&](char kind, int64_t k) {
      const int64_t in_group = k % (p * v);
      int64_t chunk = in_group / p;
      if (kind == 'B') chunk = v - chunk - 1;
      return StepPass{kind, (k / (p * v)) * p + k % p, chunk};
    };
    const int64_t warm_up =
        micro_batches == p ? total : std::min(total, 2 * (p - stage - 1) + (v - 1) * p);
    for (int64_t k = 0; k < warm_up; ++k) order.push_back(pass('F', k));
    for (int64_t k = 0; k < total - warm_up; ++k) {
      order.push_back(pass('F', k + warm_up));
      order.push_back(pass('B', k));
    }
    for (int64_t k = total - warm_up; k < total; ++k) order.push_back(pass('B', k));
    return order;
  }
  if (schedule == PipelineSchedule::kGPipe) {
    for (int64_t i = 0; i < micro_batches; ++i) order.push_back({'F', i});
    for (int64_t i = 0; i < micro_batches; ++i) order.push_back({'B', i});
    return order;
  }
  if (stages == 1) {  // no pipeline: each micro-batch's backward right after its forward
    for (int64_t i = 0; i < micro_batches; ++i) {
      order.push_back({'F', i});
      order.push_back({'B', i});
    }
    return order;
  }
  const int64_t warm_up = std::min(stages - stage - 1, micro_batches);
  for (int64_t i = 0; i < warm_up; ++i) order.push_back({'F', i});
  for (int64_t i = 0; i < micro_batches - warm_up; ++i) {
    order.push_back({'F', warm_up + i});
    order.push_back({'B', i});
  }
  for (int64_t i = micro_batches - warm_up; i < micro_batches; ++i) order.push_back({'B', i});
  return order;
}

ModelConfig rank_config(const ModelConfig& config, int64_t tp, int64_t ep, int64_t etp) {
  ModelConfig rank = tp_config(config, tp);
  if (etp == 1) rank.moe.moe_intermediate_size = config.moe.moe_intermediate_size;
  rank.moe.expert_parallel = ep;
  return rank;
}

namespace {

// FSDP2 and DTensor's plan run on the rank as the parallel oracle checks them; beside context or expert
// parallelism they would run on a rank that torchtitan lays out otherwise (FSDP2 over dp x cp ranks, the
// ring on the rank, experts dispatched by all-to-all), which census step does not simulate. Refused by name
// rather than answered with a number nothing checks.
Status check_rank_model_combinations(const ModelConfig& config, const StepOptions& o) {
  const bool dtensor = o.sequence_parallel || o.loss_parallel;
  const std::string plan = o.sequence_parallel ? "--sequence-parallel" : "--loss-parallel";
  if (o.fsdp.shards > 1 && o.context_parallel > 1)
    return refuse("--fsdp with --cp " + std::to_string(o.context_parallel),
                  "torchtitan shards FSDP2 over the dp x cp ranks and runs context_parallel's ring on the rank, "
                  "which census step does not simulate (--cp composes the ring's K/V onto the rank's tokens); "
                  "drop --fsdp or --cp");
  if (o.fsdp.shards > 1 && o.expert_parallel > 1)
    return refuse("--fsdp with --ep " + std::to_string(o.expert_parallel),
                  "FSDP2 beside expert parallelism shards each rank's experts over dp / ep ranks behind an "
                  "all-to-all dispatch, which census step does not simulate (--ep runs Transformers' masking "
                  "plan); drop --fsdp or --ep");
  if (dtensor && o.context_parallel > 1)
    return refuse(plan + " with --cp " + std::to_string(o.context_parallel),
                  "DTensor's plan under context_parallel's ring is not simulated on the rank (--cp composes "
                  "the ring's K/V); drop --cp, or run --tp without --sequence-parallel and --loss-parallel");
  if (dtensor && o.expert_parallel > 1)
    return refuse(plan + " with --ep " + std::to_string(o.expert_parallel),
                  "DTensor's plan keeps a MoE block's experts whole on the tensor-parallel ranks, as the "
                  "parallel oracle runs it; experts dispatched by all-to-all beside it are not simulated; drop "
                  "--ep, or run --tp without --sequence-parallel and --loss-parallel");
  if (dtensor && o.expert_tensor_parallel > 1)
    return refuse(plan + " with --expert-tp " + std::to_string(o.expert_tensor_parallel),
                  "DTensor's plan keeps a MoE block's experts whole on the tensor-parallel ranks (expert TP 1); "
                  "drop --expert-tp, or give --expert-tp 1");
  if (dtensor && !config.replacements.empty())
    return refuse(plan + " with --train-yaml",
                  "DTensor's plan is applied to Transformers' module names, not to a train.yaml's fused modules; "
                  "drop --train-yaml, or run --tp without --sequence-parallel and --loss-parallel");
  return {};
}

// fully_shard refuses a unit whose parameters differ in dtype where no mixed-precision policy casts
// them ("FSDP expects uniform original parameter dtype"): the first parameter of the rank's model
// whose dtype differs from its unit's first (a decoder layer, or the root: the rest), or empty.
std::string fsdp_mixed_dtype_parameter(const ModelConfig& config, const StepOptions& o) {
  Session session;
  const std::unique_ptr<CausalLM> model =
      build_causal_lm(config, rank_config(config, o), ModelChunk{0, config.num_hidden_layers, true, true});
  std::set<int64_t> in_layers;
  for (size_t i = 0; i < model->layers().size(); ++i) {
    const std::vector<Tensor> params = model->layers()[i]->parameters();
    for (const Tensor& p : params) {
      in_layers.insert(p.storage_id());
      if (p.dtype() != params.front().dtype()) return "model.layers." + std::to_string(i) + "." + p.impl()->name;
    }
  }
  std::optional<DType> root;
  for (const Tensor& p : model->parameters()) {
    if (in_layers.contains(p.storage_id())) continue;
    if (root && p.dtype() != *root) return p.impl()->name;
    root = p.dtype();
  }
  return {};
}

// Under DTensor's plan without FSDP2 (which makes every parameter a DTensor), the first parameter of the
// rank's model that stays a plain tensor, or empty: torch.optim's foreach and fused AdamW put the rank's
// parameters in one list a (device, dtype) group, and DTensor refuses an op over a list that mixes plain
// tensors in ("got mixed torch.Tensor and DTensor"). One layer of each kind stands for its kind; the
// embedding, final norm and head are DTensors under the plan.
std::string plain_parameter_under_plan(const ModelConfig& config, const StepOptions& o) {
  const std::vector<std::string> kinds = layer_kinds(config);
  std::vector<std::string> seen;
  for (size_t i = 0; i < kinds.size(); ++i) {
    if (std::find(seen.begin(), seen.end(), kinds[i]) != seen.end()) continue;
    seen.push_back(kinds[i]);
    Session session;
    const auto layer = static_cast<int64_t>(i);
    const std::unique_ptr<CausalLM> model =
        build_causal_lm(config, rank_config(config, o), ModelChunk{layer, layer + 1, false, false});
    for (const Tensor& p : model->parameters())
      if (!dtensor_by_plan(p.impl()->name, o.sequence_parallel))
        return "model.layers." + std::to_string(layer) + "." + p.impl()->name;
  }
  return {};
}

}  // namespace

Status check_step_options(const ModelConfig& config, const StepOptions& o) {
  CENSUS_TRY(check_stack_depth(config));
  if (o.seq_length < 1) return refuse("--seq-length", "must be at least 1");
  if (o.micro_batch_size < 1) return refuse("--micro-batch-size", "must be at least 1");
  if (o.micro_batch_size > kLargestMicroBatchSize)
    return refuse("--micro-batch-size", std::to_string(o.micro_batch_size) +
                                            " sequences are more than a micro-batch holds (at most 2^16); give fewer");
  if (o.micro_batches < 1) return refuse("--micro-batches", "must be at least 1");
  if (o.pipeline_stages < 1) return refuse("--pp", "must be at least 1");
  if (o.virtual_stages < 1) return refuse("--virtual-stages", "must be at least 1");
  // The bounds first: the counts below multiply them.
  for (const auto& [flag, degree] : {std::pair{"--pp", o.pipeline_stages}, std::pair{"--virtual-stages", o.virtual_stages},
                                     std::pair{"--tp", o.tensor_parallel}, std::pair{"--dp", o.composition.data_parallel},
                                     std::pair{"--cp", o.context_parallel}, std::pair{"--ep", o.expert_parallel}})
    if (degree > kLargestDegree)
      return refuse(flag, std::to_string(degree) + " is more ranks than a run has (at most 2^20 = " +
                              std::to_string(kLargestDegree) + "); give fewer");
  if (o.micro_batches > kLargestMicroBatches / o.virtual_stages)
    return refuse(o.virtual_stages > 1 ? "--micro-batches x --virtual-stages" : "--micro-batches",
                  std::to_string(o.micro_batches) + (o.virtual_stages > 1 ? " x " + std::to_string(o.virtual_stages) : "") +
                      " is more micro-batches than a step accumulates (at most 2^12 = " +
                      std::to_string(kLargestMicroBatches) + ", each a pass the step runs and reports); give fewer");
  for (const auto& [flag, bytes] : {std::pair{"--cuda-context", o.composition.cuda_context},
                                    std::pair{"--nccl-buffers", o.composition.nccl_buffers},
                                    std::pair{"--fragmentation", o.composition.fragmentation}})
    if (bytes < 0 || bytes > kLargestBytes)
      return refuse(flag, std::to_string(bytes) + " bytes is not a size Census prices; give 0 to 2^60 bytes");
  if (o.virtual_stages > 1 && o.schedule != PipelineSchedule::kInterleaved)
    return refuse("--virtual-stages", "model chunks run under --schedule interleaved; give it, or drop the option");
  if (o.schedule == PipelineSchedule::kInterleaved && (o.pipeline_stages < 2 || o.virtual_stages < 2))
    return refuse("--schedule interleaved", "needs --pp 2 or more and --virtual-stages 2 or more");
  auto chunks = pipeline_chunks(config.num_hidden_layers, o.pipeline_stages, o.virtual_stages, o.split);
  CENSUS_TRY(chunks);
  {
    const std::vector<std::string> kinds = layer_kinds(config);
    for (const auto& [kind, mode] : o.recompute_by_kind)
      if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end())
        return refuse("--recompute", echoed(kind) + " is not a layer kind of " + config.model_type);
  }
  if (o.schedule == PipelineSchedule::kInterleaved && o.micro_batches % o.pipeline_stages != 0)
    return refuse("--micro-batches " + std::to_string(o.micro_batches),
                  "the interleaved schedule runs micro-batches in groups of --pp " +
                      std::to_string(o.pipeline_stages) + "; give a multiple of it");
  if (o.tensor_parallel < 1) return refuse("--tp", "must be at least 1");
  if ((o.sequence_parallel || o.loss_parallel) && o.tensor_parallel < 2)
    return refuse(o.sequence_parallel ? "--sequence-parallel" : "--loss-parallel",
                  "shards over the tensor-parallel ranks; give --tp T with T > 1");
  if (o.sequence_parallel || o.loss_parallel) {
    if (const char* why = tensor_parallel_refusal(config))
      return refuse("--sequence-parallel / --loss-parallel on " + config.model_type, why);
    if (config.vocab_size % o.tensor_parallel != 0)
      return refuse("--tp " + std::to_string(o.tensor_parallel),
                    "must divide vocab_size (" + std::to_string(config.vocab_size) +
                        ") for the vocabulary-parallel embedding and head");
    if (o.sequence_parallel && (o.seq_length / o.context_parallel) % o.tensor_parallel != 0)
      return refuse("--tp " + std::to_string(o.tensor_parallel) + " --sequence-parallel",
                    "must divide the rank's tokens (" + std::to_string(o.seq_length / o.context_parallel) +
                        "): every rank holds the same share of the sequence");
  }
  if (o.composition.data_parallel < 1) return refuse("--dp", "must be at least 1");
  if (o.composition.zero > 0 && o.composition.data_parallel * std::max<int64_t>(o.context_parallel, 1) == 1)
    return refuse("--zero " + std::to_string(o.composition.zero),
                  "shards over the data- (and context-) parallel ranks; give --dp D > 1 or --cp C > 1");
  if (o.composition.zero < 0 || o.composition.zero > 3) return refuse("--zero", "must be 0, 1, 2 or 3");
  if (o.fsdp.shards > 1 && o.composition.zero > 0)
    return refuse("--fsdp with --zero " + std::to_string(o.composition.zero),
                  "FSDP2 shards parameters, gradients and optimizer states itself; drop --zero or --fsdp");
  if (o.fsdp.shards > 1 && (o.composition.fp32_master_weights || o.composition.fp32_gradients))
    return refuse("--fsdp", "its mixed-precision policy sets the sharded and reduce dtypes; compose no master "
                            "weights or fp32 gradients with it");
  if (o.context_parallel < 1) return refuse("--cp", "must be at least 1");
  if (o.seq_length % o.context_parallel != 0)
    return refuse("--cp " + std::to_string(o.context_parallel),
                  "must divide --seq-length (" + std::to_string(o.seq_length) +
                      "): every context-parallel rank holds the same share of the tokens");
  if (o.expert_parallel < 1) return refuse("--ep", "must be at least 1");
  if (o.expert_parallel > 1 && config.moe.num_experts == 0)
    return refuse("--ep " + std::to_string(o.expert_parallel), "the model has no experts to shard; drop the option");
  if (o.expert_parallel > 1 && config.moe.num_experts % o.expert_parallel != 0)
    return refuse("--ep " + std::to_string(o.expert_parallel),
                  "must divide the experts (" + std::to_string(config.moe.num_experts) +
                      "): every expert-parallel rank holds the same number of them");
  if (o.expert_tensor_parallel != 0 && o.expert_tensor_parallel != 1 && o.expert_tensor_parallel != o.tensor_parallel)
    return refuse("--expert-tp", "must be 1 (whole experts on every rank) or the --tp degree");
  if (o.expert_tensor_parallel == 1 && o.tensor_parallel > 1 && config.moe.moe_intermediate_size == 0)
    return refuse("--expert-tp 1", "the model's experts have no width of their own (moe_intermediate_size) for TP to "
                                   "leave whole; drop the option");
  if (o.expert_parallel > 1 && !config.moe.shards_under_expert_parallel)
    return refuse("--ep " + std::to_string(o.expert_parallel),
                  "this family's experts run every token through every expert in one batched matmul, which "
                  "expert parallelism does not shard; drop the option");
  if (o.expert_parallel > 1 && config.moe.experts_implementation != nn::ExpertsImplementation::kGroupedMm)
    return refuse("--ep with eager experts", "expert parallelism is priced on grouped_mm experts; drop the option");
  if (config.output_router_logits)
    return refuse("output_router_logits: true in the config",
                  "the load-balancing loss over every layer's router logits is not priced yet; set it to false to "
                  "price the step without it");
  CENSUS_TRY(check_rank_model_combinations(config, o));
  if (o.stage < 0 || o.stage >= o.pipeline_stages)
    return refuse("--stage " + std::to_string(o.stage),
                  "must be a stage of the pipeline, 0 to " + std::to_string(o.pipeline_stages - 1));
  // Every boundary between two model chunks, of any stage: where the model cannot be cut, refused.
  if (chunks->size() > 1 && config.family->pipeline_refusal != nullptr) {
    for (size_t g = 1; g < chunks->size(); ++g)
      if (const int64_t boundary = (*chunks)[g].begin; const char* why = config.family->pipeline_refusal(config, boundary))
        return refuse("--pp " + std::to_string(o.pipeline_stages) + " on " + config.model_type,
                      std::string("cannot cut the model before layer ") + std::to_string(boundary) + ": " + why +
                          "; run it without a pipeline");
  }
  CENSUS_TRY(check_optimizer(o.optimizer, o.optimizer_impl));
  CENSUS_TRY(check_lora(config, o));
  CENSUS_TRY(check_quantize(config, o));
  CENSUS_TRY(check_autocast(config, o));
  if (o.loss == nn::CausalLMLoss::kLigerFlce && !config.family->liger_patches)
    return refuse("--loss liger-flce on " + config.model_type,
                  "Liger has no patch for this model type (MODEL_TYPE_TO_APPLY_LIGER_FN); give --loss hf or "
                  "trl-chunked-nll");
  if ((o.loss == nn::CausalLMLoss::kTorchtuneChunked || o.loss == nn::CausalLMLoss::kTorchtuneLinear) &&
      (config.final_logit_softcapping != 0 || config.lm_head_multiplier != 1.0 || config.logits_scaling != 1.0))
    return refuse("--loss " + std::string(nn::causal_lm_loss_name(o.loss)) + " on " + config.model_type,
                  "torchtune's loss runs the bare head, without this model's transform of its logits (softcapping "
                  "or scaling), which would train another model; give --loss hf or trl-chunked-nll");
  CENSUS_TRY(check_liger_kernels(config));
  if (config.liger.any()) {
    // Liger's functions gather a DTensor input whole (full_tensor); its patch is checked against the oracle on
    // a rank's whole model, a pipeline's stages and FSDP2's units (whose unsharded parameters are plain tensors
    // while their unit runs), not where DTensors reach its functions.
    const char* with = o.tensor_parallel > 1  ? "--tp"
                       : o.context_parallel > 1 ? "--cp"
                       : o.expert_parallel > 1  ? "--ep"
                                                : nullptr;
    if (with != nullptr)
      return refuse(std::string("--liger with ") + with,
                    "Liger's kernels are not priced on DTensors yet; drop one of them");
    bool per_op = o.recompute == Recompute::kTorchtitanOp;
    for (const auto& [kind, mode] : o.recompute_by_kind) per_op = per_op || mode == Recompute::kTorchtitanOp;
    if (per_op)
      return refuse("--liger with --recompute torchtitan-op",
                    "torchtitan's per-op policy around Liger's functions is not priced yet; use --recompute none, "
                    "selective, full, full-reentrant or torchtitan-layer:N");
    if (o.offload_activations == OffloadPolicy::kTorchtune)
      return refuse("--liger with --offload-activations torchtune",
                    "torchtune's recipes do not apply Liger's patch; give --offload-activations trl (TRL applies both)");
  }
  if (o.fp8_skip_head && !o.fp8)
    return refuse("--fp8-skip-head", "leaves FP8 training's head in bf16; give --fp8 RECIPE, or drop the option");
  if (o.fsdp.cpu_offload && o.fsdp.shards <= 1)
    return refuse("--cpu-offload", "is FSDP2's CPUOffloadPolicy; give --fsdp --dp N, or drop the option");
  if (o.fsdp.wrap == FsdpWrap::kTorchtitan) {
    // torchtitan's units are checked against the oracle under FSDP2 alone, on models whose head is their own.
    if (o.fsdp.shards <= 1)
      return refuse("--fsdp-wrap torchtitan", "names FSDP2's units; give --fsdp --dp N, or drop the option");
    const char* with = o.tensor_parallel > 1    ? "--tp"
                       : o.pipeline_stages > 1  ? "--pp"
                       : o.fsdp.cpu_offload     ? "--cpu-offload"
                       : config.liger.any()     ? "--liger"
                       : o.fp8                  ? "--fp8"
                                                : nullptr;
    if (with != nullptr)
      return refuse(std::string("--fsdp-wrap torchtitan with ") + with,
                    "torchtitan's units are checked against the oracle under FSDP2 alone, not beside it yet; drop one "
                    "of them");
    if (config.tie_word_embeddings)
      return refuse("--fsdp-wrap torchtitan", config.model_type + " ties its head to its embedding, which torchtitan's "
                                                                  "units would shard apart; use --fsdp-wrap layers");
  }
  if (o.fp8) {
    // Float8Linear is checked against the oracle on the families that say so (Family::float8_linears), on a
    // rank's whole model and under FSDP2 with a bf16 all-gather; torchao's float8 tensor parallelism, its fp8 all-gather and the other
    // layouts and policies around it are not priced yet.
    const std::string flag = "--fp8 " + std::string(nn::float8_recipe_name(*o.fp8));
    if (!config.family->float8_linears)
      return refuse(flag + " on " + config.model_type,
                    "torchao's Float8Linear is not checked against the oracle on this model type yet (llama, mistral, "
                    "qwen2, qwen3, qwen3_moe, mixtral and gemma3_text run); drop --fp8");
    const char* with = sharding_flag(o) != nullptr ? sharding_flag(o)
                       : o.fsdp.cpu_offload          ? "--cpu-offload"
                       : config.liger.any()          ? "--liger"
                       : o.offload_activations       ? "--offload-activations"
                       : o.loss != nn::CausalLMLoss::kForCausalLM ? "--loss"
                                                                  : nullptr;
    // Checkpointing is checked beside it whole: every layer full (non-reentrant), or none.
    bool recompute = (o.recompute != Recompute::kNone && o.recompute != Recompute::kFull) ||
                     o.recompute_every_nth_layer > 0;
    for (const auto& [kind, mode] : o.recompute_by_kind) recompute = recompute || mode != o.recompute;
    if (with == nullptr && recompute) with = "--recompute";
    if (with != nullptr)
      return refuse(flag + " with " + with,
                    "torchao's Float8Linear is checked against the oracle alone and under FSDP2 yet; drop one of them");
  }
  if (o.fsdp.cpu_offload) {
    // CPUOffloadPolicy is checked against the oracle on FSDP2 alone, over a rank's whole model; with DTensor's
    // plan its shards are TP's local ones, and in a pipeline its units span the stage's chunks.
    const char* with = o.tensor_parallel > 1 ? "--tp" : o.pipeline_stages > 1 ? "--pp" : config.liger.any() ? "--liger" : nullptr;
    if (with != nullptr)
      return refuse(std::string("--cpu-offload with ") + with,
                    "FSDP2's CPU offloading is checked against the oracle on FSDP2 alone, not beside it yet; drop one of them");
  }
  if (o.loss != nn::CausalLMLoss::kForCausalLM) {
    // TRL gathers a DTensor head with full_tensor(), Liger reads the head's weight under FSDP1's
    // forward redirection, torchtune redistributes the hidden states to Shard(-1) under TP and runs its
    // linear loss's head outside the model (on the root's resharded weight), and each shifts the labels
    // only where nothing shards the sequence; none of these paths is priced yet. torchtune's chunked
    // output under FSDP2's layers' units is (census_oracle_parallel_loss.py): the model returns the head's
    // chunks, the root reshards, and its pre-backward hook sits on each chunk.
    const bool chunked_under_fsdp =
        o.loss == nn::CausalLMLoss::kTorchtuneChunked && o.fsdp.wrap == FsdpWrap::kLayers && !o.fsdp.cpu_offload;
    const char* with = o.tensor_parallel > 1 ? "--tp"
                       : o.fsdp.shards > 1 && !chunked_under_fsdp ? "--fsdp"
                       : o.composition.zero == 3 ? "--zero 3"
                       : o.context_parallel > 1  ? "--cp"
                                                 : nullptr;
    if (with != nullptr)
      return refuse("--loss " + std::string(nn::causal_lm_loss_name(o.loss)) + " with " + with,
                    "the loss over a sharded head or sequence is not priced yet; drop one of them");
  }
  const bool dtensors = ((o.sequence_parallel || o.loss_parallel) && o.tensor_parallel > 1) || o.fsdp.shards > 1;
  if (o.offload_activations) {
    const std::string flag = std::string("--offload-activations ") +
                             (*o.offload_activations == OffloadPolicy::kTrl ? "trl" : "torchtune");
    // The context spans one micro-batch's forward (and, TRL's, its backward); a pipeline's forwards run
    // ahead of their backwards, and a sharded rank's saves are DTensors' local shards: neither is priced.
    const char* with = o.pipeline_stages > 1        ? "--pp"
                       : o.tensor_parallel > 1      ? "--tp"
                       : o.fsdp.shards > 1          ? "--fsdp"
                       : o.context_parallel > 1     ? "--cp"
                       : o.expert_parallel > 1      ? "--ep"
                       : o.composition.zero > 0     ? "--zero"
                                                    : nullptr;
    if (with != nullptr)
      return refuse(flag + " with " + with,
                    "offloading is priced on one rank's whole model, one micro-batch's forward and backward at a "
                    "time; drop one of them");
    // Checkpointing composes with it where the oracle has run both: none, full (non-reentrant),
    // HyperParallel's selective policy, and torchtitan-layer:N, which puts every layer under full or none.
    Recompute other = o.recompute;
    for (const auto& [kind, mode] : o.recompute_by_kind)
      if (mode == Recompute::kFullReentrant || mode == Recompute::kTorchtitanOp) other = mode;
    if (other == Recompute::kFullReentrant)
      return refuse(flag + " with --recompute full-reentrant",
                    "a reentrant checkpoint re-runs its forward and a backward of its own under the offloading "
                    "hooks, which is not priced yet; use --recompute full (use_reentrant=False)");
    if (other == Recompute::kTorchtitanOp)
      return refuse(flag + " with --recompute torchtitan-op",
                    "torchtitan's per-op policy beside the offloading is not checked against the oracle yet; use "
                    "--recompute none, full, selective or torchtitan-layer:N");
    if (o.loss == nn::CausalLMLoss::kLigerFlce && *o.offload_activations == OffloadPolicy::kTorchtune)
      return refuse(flag + " with --loss liger-flce",
                    "torchtune's recipes run their own losses, not Liger's; give --loss hf, torchtune-chunked or "
                    "torchtune-linear, or --offload-activations trl");
    if (*o.offload_activations == OffloadPolicy::kTorchtune && o.loss == nn::CausalLMLoss::kTrlChunkedNll)
      return refuse(flag + " with --loss trl-chunked-nll",
                    "torchtune's recipes run their own losses, not TRL's; give --loss hf, torchtune-chunked or "
                    "torchtune-linear, or --offload-activations trl");
  }
  // The composed fp32 master weights are AdamW's: an fp32 copy and two fp32 moments, 12 B a parameter,
  // three times its bf16 moments (step/step_compose.h). Another optimizer's states do not scale so.
  if (o.composition.fp32_master_weights && o.optimizer != StepOptimizer::kAdamW && o.optimizer != StepOptimizer::kNone)
    return refuse("--master-weights fp32 with --optimizer " + std::string(optimizer_name(o.optimizer)),
                  "the composed fp32 master weights and moments are AdamW's (12 B a parameter); this optimizer's "
                  "fp32 states are not priced yet: drop --master-weights, or use adamw");
  if (o.optimizer_in_backward) {
    if (o.optimizer == StepOptimizer::kNone)
      return refuse("--optimizer-in-backward with --optimizer none", "there is no optimizer to step in the backward; "
                                                                      "drop --optimizer-in-backward");
    if (o.optimizer == StepOptimizer::kMuon)
      return refuse("--optimizer-in-backward with --optimizer muon",
                    "Muon and the AdamW beside it step as one pair of optimizers, not one a parameter; drop "
                    "--optimizer-in-backward");
    if (o.micro_batches * o.virtual_stages > 1)
      return refuse("--optimizer-in-backward with --micro-batches " + std::to_string(o.micro_batches) +
                        (o.virtual_stages > 1 ? " x --virtual-stages " + std::to_string(o.virtual_stages) : ""),
                    "each gradient is stepped and freed as soon as it is made, so there is none to accumulate "
                    "(torchtune refuses gradient accumulation with optimizer_in_bwd); give one micro-batch");
    if (o.composition.zero > 0 || dtensors)
      return refuse(std::string("--optimizer-in-backward with ") +
                        (o.composition.zero > 0 ? "--zero" : o.fsdp.shards > 1 ? "--fsdp" : "DTensor's plan"),
                    "one optimizer a parameter on sharded or DTensor parameters is not priced yet; drop one of them");
  }
  const nn::OptimizerImpl impl = optimizer_impl_or_default(o.optimizer, o.optimizer_impl, o.fsdp.cpu_offload);
  if (o.optimizer != StepOptimizer::kNone && !optimizer_states_shard_with_parameters(o.optimizer)) {
    const std::string flag = "--optimizer " + std::string(optimizer_name(o.optimizer));
    if (o.composition.zero > 0)
      return refuse(flag + " with --zero " + std::to_string(o.composition.zero),
                    "ZeRO shards a flat buffer of the parameters, which has none of the rows, columns or blocks this "
                    "optimizer lays its states out by; this is not priced yet: drop --zero, or use adamw or sgd");
    if (dtensors)
      return refuse(flag + (o.fsdp.shards > 1 ? " with --fsdp" : " with DTensor's plan (--sequence-parallel or --loss-parallel)"),
                    "its states on DTensor shards are not priced yet; use adamw or sgd, or drop the option");
  }
  // The list forms over DTensor's plan on the rank alone (FSDP2 makes every parameter a DTensor).
  if (optimizer_states_shard_with_parameters(o.optimizer) && impl != nn::OptimizerImpl::kForLoop &&
      (o.sequence_parallel || o.loss_parallel) && o.tensor_parallel > 1 && o.fsdp.shards <= 1) {
    const std::string flag = "--optimizer-impl " + std::string(nn::optimizer_impl_name(impl)) + " with " +
                             (o.sequence_parallel ? "--sequence-parallel" : "--loss-parallel");
    if (const std::string p = plain_parameter_under_plan(config, o); !p.empty())
      return refuse(flag, "torch.optim's " + std::string(o.optimizer == StepOptimizer::kSGD ? "SGD" : "AdamW") +
                          " puts the rank's DTensor parameters and the plain ones DTensor's plan "
                          "leaves whole (" + p + ") in one list, which PyTorch refuses (\"got mixed torch.Tensor and "
                          "DTensor\"); give --optimizer-impl for-loop, or --fsdp, which makes every parameter a DTensor");
    if (impl == nn::OptimizerImpl::kFused)
      return refuse(flag, "the fused kernel's DTensor dispatch first redistributes each gradient whose placement is not "
                          "its parameter's (the norms' partial sums under sequence parallelism all-reduced, the "
                          "replicated embedding gradient's rows copied), which census step does not price; give "
                          "--optimizer-impl foreach or for-loop, or --fsdp");
  }
  // Reentrant checkpointing runs the layer's forward under no_grad: FSDP2 hangs its backward hooks on the
  // layer's outputs only where they need a gradient, and DTensor's plan its redistributions' backward;
  // neither is simulated around a reentrant region.
  bool reentrant = o.recompute == Recompute::kFullReentrant;
  for (const auto& [kind, mode] : o.recompute_by_kind) reentrant = reentrant || mode == Recompute::kFullReentrant;
  if (reentrant && (o.fsdp.shards > 1 || o.sequence_parallel || o.loss_parallel))
    return refuse(std::string("--recompute full-reentrant with ") +
                      (o.fsdp.shards > 1 ? "--fsdp" : o.sequence_parallel ? "--sequence-parallel" : "--loss-parallel"),
                  "a reentrant region's forward runs under no_grad, where FSDP2's and DTensor's backward hooks are not "
                  "simulated; give --recompute full (non-reentrant, as torchtitan runs it)");
  if (o.recompute_every_nth_layer < 0 || o.recompute_every_nth_layer > kLargestLayerPeriod)
    return refuse("--recompute torchtitan-layer:" + std::to_string(o.recompute_every_nth_layer),
                  "give N from 1 to 2^20 layers");
  if (o.fsdp.shards > 1 && !o.fsdp.mixed_precision)
    if (const std::string p = fsdp_mixed_dtype_parameter(config, o); !p.empty())
      return refuse("--fsdp without --master-weights fp32",
                    "fully_shard expects one dtype across a unit's parameters, and this bf16 model keeps " + p +
                        " in fp32 (PyTorch: \"FSDP expects uniform original parameter dtype\"); give --master-weights "
                        "fp32, fp32 shards under MixedPrecisionPolicy(bf16, fp32) as torchtitan runs it");
  return {};
}

namespace {

bool dtensor_plan(const StepOptions& o) { return o.tensor_parallel > 1 && (o.sequence_parallel || o.loss_parallel); }

}  // namespace

ModelConfig rank_config(const ModelConfig& config, const StepOptions& options) {
  if (!dtensor_plan(options))
    return census::rank_config(config, options.tensor_parallel, options.expert_parallel, options.expert_tensor_parallel);
  ModelConfig rank = dtensor_layer_config(config, options.tensor_parallel);
  rank.moe.expert_parallel = options.expert_parallel;
  return rank;
}

void set_fine_tuned_session(Session& session, const StepOptions& o) {
  session.set_parameters_require_grad(!o.lora);  // under LoRA the base is frozen; its adapters train
  if (o.quantize && o.quantize->prepare_kbit) session.set_bf16_parameter_dtype(DType::kFloat32);
  // Loaded in fp32 for the Trainer's autocast: every parameter and every buffer made without a dtype.
  if (o.fp32_weights()) {
    session.set_bf16_parameter_dtype(DType::kFloat32);
    session.set_default_dtype(DType::kFloat32);
  }
}

namespace {

// The K/V a context-parallel rank's ring attention receives for one layer: the other C - 1 shards'
// keys and values of each of the micro-batch's b sequences, (C - 1) (S / C) tokens x b x 2 x the
// rank's KV heads x head_dim, in bf16.
int64_t ring_kv_bytes(const ModelConfig& rank, const StepOptions& o) {
  const int64_t c = o.context_parallel;
  return (c - 1) * (o.seq_length / c) * o.micro_batch_size * 2 * rank.num_key_value_heads * rank.head_dim *
         element_size(DType::kBFloat16);
}

// One micro-batch's graph between its forward and its backward, and what the stage holds with it.
struct Held {
  Tensor loss;  // last stage: the (scaled) loss
  Tensor out;   // another stage: its output, sent on
  Tensor x;     // a stage that is not first: the received hidden state, a leaf
};

// A micro-batch's pass through a chunk, in flight between its forward and its backward: its graph
// (a pass through the engine) or its replay's id (step/step_bytes.h).
struct InFlight {
  std::optional<Held> held;
  int64_t replay = -1;
};

// Each chunk's recorded passes: the forward of the second micro-batch it runs and that micro-batch's
// backward, the first a later forward is a replay of, the second a later backward's (the first
// backward differs: it makes every .grad; a later one adds into them).
struct Recorded {
  int64_t forwards = 0;       // forwards run through the engine so far
  int64_t micro_batch = -1;  // the recorded forward's
  StepPassLog forward, backward;
  bool has_forward = false, has_backward = false;
};

// Each decoder layer of the model's loop as the step's recompute mode wraps it: its kind's mode, or under
// torchtitan-layer:N its count among the stage's layers (its chunks' in order, from 1).
class RecomputedLayers final : public LayerRunner {
 public:
  RecomputedLayers(const ModelConfig& config, const StepOptions& o, const std::vector<ModelChunk>& chunks) {
    const std::vector<std::string> kinds = layer_kinds(config);
    RecomputeChoice choice{o.recompute, o.recompute_by_kind, o.recompute_every_nth_layer};
    modes_.assign(kinds.size(), Recompute::kNone);
    int64_t count = 0;
    for (const ModelChunk& chunk : chunks)
      for (int64_t i = chunk.begin; i < chunk.end; ++i)
        modes_[static_cast<size_t>(i)] = choice.of_layer(++count, kinds[static_cast<size_t>(i)]);
  }
  Tensor run(int64_t index, const Tensor& hidden_states, const LayerForward& forward) const override {
    return checkpointed(modes_[static_cast<size_t>(index)], forward, hidden_states);
  }

 private:
  std::vector<Recompute> modes_;  // by layer index
};

class StepRunner {
 public:
  StepRunner(const ModelConfig& config, const StepOptions& options, bool replays)
      : c_(config), o_(options), replays_(replays), layer_config_(rank_config(config, options)),
        model_config_(config), tokens_(options.seq_length / options.context_parallel) {
    if (options.lora) lora_ = resolved_lora(c_, *options.lora);
    if (dtensor_plan(o_)) {
      // The model's embedding and head hold the rank's V / T rows (vocabulary parallel).
      model_config_.vocab_size = c_.vocab_size / o_.tensor_parallel;
      TensorParallelPlan plan{o_.tensor_parallel, o_.sequence_parallel, o_.loss_parallel, c_.vocab_size, tokens_};
      styles_.emplace(plan);
    }
    // Chunk v of stage r holds the model's (v * P + r)-th run of layers (step/pipeline_split.h); the
    // first chunk of stage 0 the embedding, the last chunk of the last stage the final norm, head and loss.
    const int64_t p = o_.pipeline_stages, v = o_.virtual_stages;
    const std::vector<LayerRange> ranges = *pipeline_chunks(c_.num_hidden_layers, p, v, o_.split);  // checked
    for (int64_t chunk = 0; chunk < v; ++chunk) {
      ModelChunk c;
      c.begin = ranges[static_cast<size_t>(chunk * p + o_.stage)].begin;
      c.end = ranges[static_cast<size_t>(chunk * p + o_.stage)].end;
      c.first = o_.stage == 0 && chunk == 0;
      c.last = o_.stage == p - 1 && chunk == v - 1;
      chunks_.push_back(c);
    }
    layers_.emplace(c_, o_, chunks_);
  }

  StepCensus run();
  bool replay_failed() const { return replay_failed_; }
  // Under LoRA, a target module name that adapted no Linear of the model (empty: none).
  const std::string& unmatched_lora_target() const { return unmatched_lora_target_; }
  // torchtune's offloading asserts at the next forward that the backward unpacked every save.
  bool offload_asserts() const {
    return offload_ && o_.offload_activations == OffloadPolicy::kTorchtune && offload_->left_unpacked() > 0;
  }
  int64_t left_unpacked() const { return offload_ ? offload_->left_unpacked() : 0; }
  bool too_large() const { return bytes_.too_large(); }
  // FSDP2's embedding or head unit (--fsdp-wrap torchtitan) that the family's model ran outside its hooks.
  bool fsdp_units_unhooked() const { return fsdp_ && !fsdp_->units_hooked(); }

 private:
  void build();
  Held forward(size_t chunk);
  void backward(Held held, size_t chunk);
  void note_gradients();
  int64_t gradient_bytes() const;

  const ModelConfig& c_;
  const StepOptions& o_;
  bool replays_;  // later micro-batches' passes replayed, not run through the engine
  bool replay_failed_ = false;
  ModelConfig layer_config_;  // as one tensor- and expert-parallel rank builds its layers
  ModelConfig model_config_;  // as the rank builds the model around them (its vocabulary shard)
  std::optional<DTensorStyles> styles_;  // DTensor's plan, where the step runs one
  int64_t tokens_;            // each sequence's tokens on this rank: its context-parallel share
  std::optional<RecomputedLayers> layers_;  // made once the chunks are known
  Session session_;  // before the models: every tensor of the step dies before it
  StepBytes bytes_;
  Ref<OffloadActivations> offload_;  // where activations are offloaded; made in the session
  std::vector<ModelChunk> chunks_;
  std::vector<std::unique_ptr<CausalLM>> models_;  // one per chunk, as the stage builds them
  std::optional<Fsdp2> fsdp_;     // FSDP2's units, where the step shards with it
  std::vector<Tensor> params_;   // the stage's, in the model's order (under FSDP2 the rank's shards)
  int64_t parameter_count_ = 0;  // the model's parameters (global, as a DTensor's numel)
  std::vector<Tensor> buffers_;  // each chunk's registered buffers
  int64_t largest_layer_bytes_ = 0;
  std::optional<nn::LoraConfig> lora_;  // the step's adapters, their targets resolved
  std::vector<Tensor> trainable_;       // the parameters the optimizer steps: those that require grad
  std::string unmatched_lora_target_;
  int64_t adapted_linears_ = 0;
};

void StepRunner::build() {
  // Under FSDP2's mixed precision every parameter a layer reads is its bf16 all-gather, whatever dtype
  // its module declares (Session::parameter_dtype); the fp32 shards are made after.
  // torchtitan builds that model in fp32: its buffers made without a dtype are fp32 (Session::default_dtype).
  if (o_.fsdp.shards > 1 && o_.fsdp.mixed_precision) {
    session_.set_parameter_dtype(DType::kBFloat16);
    session_.set_default_dtype(DType::kFloat32);
  }
  set_fine_tuned_session(session_, o_);
  for (const ModelChunk& chunk : chunks_) {
    models_.push_back(build_causal_lm(model_config_, layer_config_, chunk));
    const CausalLM& model = *models_.back();
    params_.insert(params_.end(), model.parameters().begin(), model.parameters().end());
    buffers_.insert(buffers_.end(), model.buffers().begin(), model.buffers().end());
    largest_layer_bytes_ = std::max(largest_layer_bytes_, model.largest_layer_parameter_bytes());
  }
  session_.set_parameter_dtype(std::nullopt);
  session_.set_default_dtype(DType::kBFloat16);
  session_.set_parameters_require_grad(true);
  session_.set_bf16_parameter_dtype(std::nullopt);
  // Counted as the model's (a DTensor's numel is its global one).
  for (const Tensor& p : params_)
    parameter_count_ += styles_ && sharded_by_plan(p.impl()->name) ? p.numel() * o_.tensor_parallel : p.numel();
  if (o_.fsdp.shards > 1) {
    std::vector<const CausalLM*> chunks;
    for (const auto& model : models_) chunks.push_back(model.get());
    FsdpPolicy policy = o_.fsdp;
    if (styles_) {
      policy.tensor_parallel = o_.tensor_parallel;
      policy.sequence_parallel = o_.sequence_parallel;
    }
    fsdp_.emplace(bytes_, policy, chunks);
    bytes_.count_parameter_grads(false);
    params_ = fsdp_->sharded_parameters();
  }
  // The Trainer's optimizer is made over the parameters that require grad: under LoRA, the adapters.
  for (const Tensor& p : params_)
    if (p.impl()->requires_grad) trainable_.push_back(p);
}

Held StepRunner::forward(size_t chunk) {
  const CausalLM& model = *models_[chunk];
  Held held;
  const int64_t batch = o_.micro_batch_size, seq = tokens_;
  Tensor labels;
  if (model.chunk().last) {
    labels = ops::randint(Dims{batch, seq});
    bytes_.note(labels, StepCategory::kInputs);
  }
  Tensor hidden_states;
  // The model's argument: the input ids (the first chunk), else the hidden states received, a leaf. The
  // caller's variable holds the ids until the forward returns (the embedding's save may not: activation
  // offloading moves it to the host).
  Tensor input_ids;
  std::optional<Fsdp2::Layers> sharded;  // FSDP2's runner of the model's units, the head's too
  // accelerate's wrapped forward: the model's forward and its loss inside the autocast region, whose cast
  // cache goes as it closes, before convert_outputs_to_fp32 copies the outputs.
  std::optional<AutocastScope> autocast;
  if (o_.autocast) autocast.emplace(/*enabled=*/true);
  {
    if (model.chunk().first) {
      input_ids = ops::randint(Dims{batch, seq});
      bytes_.note(input_ids, StepCategory::kInputs);
    } else {
      // Under sequence parallelism a stage receives its S / T tokens of the stream.
      const int64_t stream = o_.sequence_parallel ? seq / o_.tensor_parallel : seq;
      held.x = ops::randn(Dims{batch, stream, c_.hidden_size}, DType::kBFloat16, /*requires_grad=*/true);
      bytes_.note(held.x, StepCategory::kInputs);
    }
    if (fsdp_) {
      fsdp_->root_pre_forward(chunk);
      sharded.emplace(*fsdp_, chunk, *layers_);
      hidden_states = model.model_forward(input_ids, held.x, *sharded);
    } else {
      hidden_states = model.model_forward(input_ids, held.x, *layers_);
    }
  }
  if (!model.chunk().last) {
    if (fsdp_) {
      fsdp_->root_post_forward(chunk);
      hidden_states = fsdp_->root_output(chunk, hidden_states);
    }
    held.out = std::move(hidden_states);
    return held;
  }
  // The causal LM's logits and loss; the output object (loss and logits) returned, then dropped with its
  // logits; the loss kept, scaled by 1/M.
  CausalLM::Output out = model.causal_lm_output(std::move(hidden_states), labels, o_.loss, sharded ? &*sharded : nullptr);
  // The root's forward ends as the model returns, before the output object is dropped; where the model
  // returned before its loss (torchtune's chunked output) it has ended there.
  if (fsdp_ && !fsdp_->root_returned(chunk)) {
    fsdp_->root_post_forward(chunk);
    out.loss = fsdp_->root_output(chunk, out.loss);
  }
  autocast.reset();
  // convert_outputs_to_fp32: a new output object holding an fp32 copy of the bf16 logits; the model's own
  // goes as it returns (its logits with it), the copy with the new one, once the loss is taken from it.
  Tensor fp32_logits;
  if (o_.autocast && out.logits.defined()) fp32_logits = ops::to(out.logits, DType::kFloat32);
  Tensor loss = std::move(out.loss);
  out = CausalLM::Output();
  fp32_logits = Tensor();
  held.loss = o_.micro_batches > 1 ? ops::div_number(loss, static_cast<double>(o_.micro_batches)) : loss;
  return held;
}

void StepRunner::backward(Held held, size_t chunk) {
  if (held.loss.defined()) {
    Tensor loss = std::move(held.loss);
    const Tensor ones = ops::ones_like(loss);  // loss.backward(): the root gradient, held until it returns
    run_backward(loss, ones);
    if (fsdp_) fsdp_->end_of_backward(chunk);  // the engine's final callback
  } else {
    Tensor out = std::move(held.out);
    Tensor grad = ops::randn(out.sizes(), out.dtype());
    bytes_.note(grad, StepCategory::kInputs);
    run_backward(out, grad);
    if (fsdp_) fsdp_->end_of_backward(chunk);
  }
  if (held.x.defined() && held.x.impl()->grad) bytes_.note(held.x.grad(), StepCategory::kInputs);  // sent on
  held = Held();
  note_gradients();
}

void StepRunner::note_gradients() {
  for (const Tensor& p : params_)
    if (p.impl()->grad) bytes_.note(p.grad(), StepCategory::kGradients);
}

int64_t StepRunner::gradient_bytes() const {
  int64_t total = 0;
  std::vector<int64_t> counted;  // each storage once: FSDP2's sharded gradients are views of one
  for (const Tensor& p : params_)
    if (p.impl()->grad && bytes_.is_live(p.grad())) {
      const int64_t id = p.impl()->grad->storage->id;
      if (std::find(counted.begin(), counted.end(), id) != counted.end()) continue;
      counted.push_back(id);
      total += p.impl()->grad->storage->nbytes;
    }
  return total;
}

// Note [The step folds alike iterations]
// A loop of alike iterations (the gated delta rule's chunks) runs its standing iteration once for the
// alike ones, whose storages it then resizes (Note [Alike iterations], ops/dispatch.h): the step's
// heap is the step-by-step run's at every moment but inside such a loop's standing iteration and the
// backward of it, where it holds less, and never at a phase's peak: each phase's peak, its split and
// the op it names, and what the peak holds by op, are the same, in checkpointed layers too, whose
// forward keeps one carried value at a time (Note [Carried values of alike iterations]).
// tests/step/step_folded_test.cpp runs both on every family with such a loop, in every recompute
// mode. The allocator is the exception: it sees each storage's blocks, and the alike iterations' are
// many blocks, not one; under --allocator every iteration runs.
StepCensus StepRunner::run() {
  const nn::ParallelStylesScope styles(styles_ ? &*styles_ : nullptr);
  const nn::Float8TrainingScope fp8(o_.fp8, o_.fp8_skip_head);
  // Transformers' gradient_checkpointing_enable runs enable_input_require_grads on a text model.
  const nn::LoraScope lora(lora_ ? &*lora_ : nullptr, o_.recompute != Recompute::kNone);
  const nn::Bnb4bitScope quantized(o_.quantize ? &*o_.quantize : nullptr);
  session_.set_fold_alike_iterations(!o_.allocator.has_value());
  build();
  // The quantization state, beside each packed weight: the model's buffers, made with it.
  buffers_.insert(buffers_.end(), quantized.state_tensors().begin(), quantized.state_tensors().end());
  if (lora_) {
    adapted_linears_ = lora.adapted_linears();
    unmatched_lora_target_ = lora.unmatched_target();
    if (!unmatched_lora_target_.empty()) return StepCensus();
  }
  session_.add_observer(&bytes_);
  if (o_.offload_activations) offload_ = arena_shared<OffloadActivations>(*o_.offload_activations);
  StepCensus result;
  result.first_layer = chunks_.front().begin;
  result.end_layer = chunks_.back().end;
  for (const ModelChunk& chunk : chunks_) result.chunks.push_back({chunk.begin, chunk.end});
  bytes_.mark_phase("setup");
  for (const Tensor& p : params_) {
    bytes_.track(p);
    bytes_.note(p, StepCategory::kParameters);
    result.parameter_bytes += p.storage()->nbytes;
  }
  result.parameter_count = parameter_count_;
  result.parameter_tensors = static_cast<int64_t>(params_.size());
  for (const Tensor& p : trainable_) {
    result.trainable_parameter_count += p.numel();
    result.trainable_parameter_bytes += p.storage()->nbytes;
  }
  result.adapted_linears = adapted_linears_;
  result.quantized_linears = quantized.quantized_linears();
  for (const Tensor& p : quantized.packed_weights()) result.quantized_weight_bytes += p.storage()->nbytes;
  for (const Tensor& b : quantized.state_tensors()) result.quantization_state_bytes += b.storage()->nbytes;
  for (const Tensor& b : buffers_) {
    bytes_.track(b);
    bytes_.note(b, StepCategory::kBuffers);
    result.buffer_bytes += b.storage()->nbytes;
  }
  // The optimizer's states live on after its step, as torch.optim's do. In the steady state (the
  // default) the previous step made them: they are here from the start.
  // A state is counted from the op that makes it; the steady step's, made by the step before, from
  // its start, as the step's other inputs (the oracle's "input").
  nn::Optimizer::Hooks hooks{[this](const Tensor& state) {
                               bytes_.track(state);
                               bytes_.note(state, StepCategory::kOptimizerStates);
                             },
                             [this](const Tensor& host) { bytes_.note_off_device(host); },
                             [this](const Tensor& unified) { bytes_.exclude(unified); }};
  // Under CPUOffloadPolicy the optimizer steps host parameters: its states and every tensor it makes are
  // host tensors, and torch.optim's default form for them is the for-loop (foreach only on CUDA tensors).
  const bool on_host = o_.fsdp.cpu_offload;
  const std::optional<nn::OptimizerImpl> optimizer_impl =
      o_.optimizer == StepOptimizer::kNone ? o_.optimizer_impl
                                           : optimizer_impl_or_default(o_.optimizer, o_.optimizer_impl, on_host);
  // One optimizer over the rank's parameters, stepped after the passes; or, in the backward, one a
  // parameter, each stepped by its parameter's post-accumulate-grad hook.
  std::vector<std::unique_ptr<nn::Optimizer>> optimizers;
  std::unordered_map<const TensorImpl*, size_t> stepped_by;
  std::vector<bool> stepped;
  if (o_.optimizer != StepOptimizer::kNone && o_.optimizer_in_backward) {
    for (size_t i = 0; i < trainable_.size(); ++i) {
      optimizers.push_back(make_optimizer(o_.optimizer, optimizer_impl, {trainable_[i]}, hooks));
      stepped_by[trainable_[i].impl()] = i;
    }
    stepped.assign(trainable_.size(), false);
    session_.set_post_accumulate_grad_hook([&](const TensorImpl& parameter) {
      const auto it = stepped_by.find(&parameter);
      if (it == stepped_by.end()) return;
      NoGradGuard no_grad;  // hooks run under the backward's no_grad
      bytes_.note(Tensor(parameter.grad), StepCategory::kGradients);  // .grad, until the step frees it
      optimizers[it->second]->step();
      optimizers[it->second]->zero_grad();
      stepped[it->second] = true;
    });
  } else if (o_.optimizer != StepOptimizer::kNone) {
    optimizers.push_back(make_optimizer(o_.optimizer, optimizer_impl, trainable_, hooks));
  }
  struct HookReset {
    Session& session;
    ~HookReset() { session.set_post_accumulate_grad_hook(nullptr); }
  } hook_reset{session_};
  if (!o_.first_step) {
    const StepHostScope states_on(bytes_, on_host);
    session_.set_muted(true);  // made before this step: no op of it
    for (const std::unique_ptr<nn::Optimizer>& optimizer : optimizers) optimizer->make_states();
    session_.set_muted(false);
  }

  const int64_t v = o_.virtual_stages;
  std::vector<InFlight> flights(static_cast<size_t>(o_.micro_batches * v));
  std::vector<Recorded> recorded(static_cast<size_t>(v));
  bool first_backward = true;
  for (const StepPass& pass :
       pipeline_order(o_.schedule, o_.pipeline_stages, o_.stage, o_.micro_batches, o_.virtual_stages)) {
    // "F3", or with model chunks "F3.1" (micro-batch 3 through chunk 1).
    std::string name = std::string(1, pass.pass) + std::to_string(pass.micro_batch);
    if (v > 1) name += "." + std::to_string(pass.chunk);
    result.schedule.push_back(name);
    bytes_.mark_phase(name);
    InFlight& flight = flights[static_cast<size_t>(pass.micro_batch * v + pass.chunk)];
    Recorded& rec = recorded[static_cast<size_t>(pass.chunk)];
    if (pass.pass == 'F') {
      if (replays_ && rec.has_forward) {
        flight.replay = bytes_.replay(rec.forward);
        if (offload_) offload_->replayed();
        ++result.passes_replayed;
        continue;
      }
      const bool records = replays_ && ++rec.forwards == 2;
      StepPassLog log = bytes_.begin_pass();
      if (offload_) offload_->enter();  // TRL's training_step: the context around the micro-batch
      flight.held = forward(static_cast<size_t>(pass.chunk));
      if (!records) continue;
      bytes_.end_pass(log);
      // A forward that frees what another pass made is not replayed.
      rec.has_forward = bytes_.replays(log, nullptr);
      rec.forward = log;
      rec.micro_batch = pass.micro_batch;
      continue;
    }
    if (flight.held) {
      const bool records = replays_ && pass.micro_batch == rec.micro_batch;
      StepPassLog log = bytes_.begin_pass();
      backward(std::move(*flight.held), static_cast<size_t>(pass.chunk));
      flight.held.reset();
      if (offload_) {
        offload_->exit();  // TRL's training_step returns (torchtune's recipe left before the loss)
        offload_->end_micro_batch();
      }
      if (records) {
        bytes_.end_pass(log);
        rec.backward = log;
        rec.has_backward = bytes_.replays(log, &rec.forward);
      }
      result.gradient_bytes_after_last_backward = gradient_bytes();
    } else {
      // A replayed forward's backward: the recorded backward, freeing the forward's replayed storages.
      if (!rec.has_backward) {
        replay_failed_ = true;
        break;
      }
      bytes_.replay(rec.backward, flight.replay);
      flight.replay = -1;
      ++result.passes_replayed;
    }
    if (first_backward) result.gradient_bytes_after_first_backward = result.gradient_bytes_after_last_backward;
    first_backward = false;
  }
  if (!optimizers.empty()) {
    // A parameter the backward gave no gradient never had states: step 1's _init_group skipped it (in
    // the backward, its hook never ran).
    const bool in_backward = !stepped.empty();
    for (size_t i = 0; i < stepped.size(); ++i)
      if (!stepped[i])
        for (const Tensor& state : optimizers[i]->drop_states()) bytes_.retract(state);
    if (!in_backward)
      for (const Tensor& state : optimizers.front()->drop_states_without_grad()) bytes_.retract(state);
    bytes_.mark_phase("optimizer_step");  // in the backward, each parameter's step has run: none here
    const StepHostScope step_on(bytes_, on_host);
    if (!in_backward) optimizers.front()->step();
    for (const std::unique_ptr<nn::Optimizer>& optimizer : optimizers) {
      result.optimizer_state_bytes += optimizer->state_bytes();
      result.optimizer_unified_memory_bytes += optimizer->unified_memory_bytes();
    }
    bytes_.mark_phase("zero_grad");
    for (const std::unique_ptr<nn::Optimizer>& optimizer : optimizers) optimizer->zero_grad();
  }
  bytes_.mark_phase("end");
  if (bytes_.too_large()) {  // its sums mean nothing: census_step refuses it
    session_.remove_observer(&bytes_);
    return result;
  }
  result.gradient_bytes_at_end = gradient_bytes();
  if (offload_) {
    result.host = offload_->host();
    result.offload = offload_->counts();
  }
  if (on_host) result.offloaded_to_host = bytes_.analyse_host();
  // The further compositions, composed with the step's own options as its own composition is below.
  const int64_t ring_kv = ring_kv_bytes(layer_config_, o_);
  std::vector<StepComposition> also_composed = o_.also_composed;
  bool plain = !o_.also_composed_only;  // the step's own analysis is asked, or stands for a composition
  for (StepComposition& also : also_composed) {
    also.context_parallel = o_.context_parallel;
    also.ring_kv_bytes = ring_kv;
    also.largest_layer_parameter_bytes = largest_layer_bytes_;
    plain = plain || !also.composes();
  }
  if (plain) result.analysis = bytes_.analyse({}, o_.peak_holders);
  // Where the step starts with the optimizer's states made, the allocator starts after a first step.
  const bool steady_state = !optimizers.empty() && !o_.first_step;
  result.largest_layer_parameter_bytes = largest_layer_bytes_;
  if (o_.also_composed_only) {
    // the step's own composition and allocator: not asked
  } else if (o_.composition.composes() || o_.context_parallel > 1) {
    StepComposition composition = o_.composition;
    composition.largest_layer_parameter_bytes = largest_layer_bytes_;
    composition.context_parallel = o_.context_parallel;
    composition.ring_kv_bytes = ring_kv;
    result.composition = composition;
    result.composed = bytes_.analyse(step_weights(composition), o_.peak_holders);
    result.composed_peak.bytes = -1;
    for (const StepPhase& phase : result.composed.phases)
      if (phase.peak.bytes > result.composed_peak.bytes) result.composed_peak = phase.peak;
    if (o_.allocator)
      result.allocator = simulate_step_allocator(bytes_, step_weights(composition), *o_.allocator, steady_state);
  } else if (o_.allocator) {
    result.allocator = simulate_step_allocator(bytes_, StepWeights{}, *o_.allocator, steady_state);
  }
  // Each further composition's highest phase peak, the ones that compose reweighed in one walk of the log.
  std::vector<StepWeights> reweighed;
  for (const StepComposition& also : also_composed) {
    const StepWeights weights = also.composes() ? step_weights(also) : StepWeights{};
    if (o_.allocator)
      result.also_composed_allocators.push_back(simulate_step_allocator(bytes_, weights, *o_.allocator, steady_state));
    if (also.composes()) reweighed.push_back(weights);
  }
  std::vector<StepMoment> peaks = bytes_.highest_phase_peaks(reweighed);
  for (size_t i = 0, k = 0; i < also_composed.size(); ++i)
    result.also_composed_peaks.push_back(also_composed[i].composes() ? std::move(peaks[k++]) : result.analysis.peak);
  auto highest = [&](char prefix) {
    StepMoment best;
    best.bytes = -1;
    for (const StepPhase& phase : result.analysis.phases) {
      const bool match = prefix == 'O' ? phase.name == "optimizer_step"
                                       : phase.name.size() > 1 && phase.name[0] == prefix &&
                                             std::isdigit(static_cast<unsigned char>(phase.name[1]));
      if (match && phase.peak.bytes > best.bytes) best = phase.peak;
    }
    return best;
  };
  result.forward_peak = highest('F');
  result.backward_peak = highest('B');
  result.optimizer_step_peak = highest('O');
  session_.remove_observer(&bytes_);
  return result;
}

// A run's census, or its refusal where its live bytes passed kLargestStepBytes.
Result<StepCensus> checked_run(const ModelConfig& config, StepRunner& runner) {
  StepCensus step = runner.run();
  if (const std::string& name = runner.unmatched_lora_target(); !name.empty())
    return refuse("--lora-targets " + name, "names no Linear of " + config.model_type +
                                                "; give the names of its Linears (q_proj, v_proj, up_proj, ...) or all-linear");
  if (runner.offload_asserts())
    return refuse("--offload-activations torchtune",
                  "the backward leaves " + std::to_string(runner.left_unpacked()) +
                      " saves unpacked (nodes that never run), and torchtune's OffloadActivations asserts at the next "
                      "forward that it left none; give --offload-activations trl, whose next step forgets them");
  if (runner.fsdp_units_unhooked())
    return refuse("--fsdp-wrap torchtitan", config.model_type + "'s model runs its embedding or final norm itself, "
                                            "outside the units torchtitan wraps; use --fsdp-wrap layers");
  if (runner.too_large())
    return refuse("config", "one rank's step holds more than 2^59 bytes (512 PiB) at once, past the counts Census "
                            "keeps exact; give more --pp or --tp ranks, fewer tokens or micro-batches, or fix the config");
  return step;
}

}  // namespace

Result<StepCensus> census_step(const ModelConfig& config, const StepOptions& options) {
  CENSUS_TRY(check_step_options(config, options));
  // A replay repeats a recorded pass's events, FSDP2's included, so the units must stand as they stood
  // when it was recorded: so they do where each micro-batch's backward follows its forward (every unit
  // resharded between them), not in a pipeline's schedule, whose passes find the units as the other
  // micro-batches left them. There every pass runs through the engine.
  const bool fsdp_in_pipeline = options.fsdp.shards > 1 && options.pipeline_stages > 1;
  if (!fsdp_in_pipeline) {
    StepRunner runner(config, options, /*replays=*/true);
    Result<StepCensus> step = checked_run(config, runner);
    if (!step || !runner.replay_failed()) return step;
  }
  StepRunner runner(config, options, /*replays=*/false);
  return checked_run(config, runner);
}

Result<StepCensus> census_step_op_by_op(const ModelConfig& config, const StepOptions& options) {
  CENSUS_TRY(check_step_options(config, options));
  StepRunner runner(config, options, /*replays=*/false);
  return checked_run(config, runner);
}

}  // namespace census
