// Census speed: one layer census (plain, selective), the output layer, and a whole model's
// activations (each kind plain and selective at TP 1 and TP 2, and its recompute shares).
// Built by the README's commands, run by hand: build/census_bench. Targets: <= 20 us per layer census,
// <= 1 ms per whole activations of a dense model, <= 2 ms for DeepSeek-V3 (a dense and a MoE kind),
// Qwen3-Next-80B-A3B's activations at 1M tokens as at 4096.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "census/activations.h"
#include "census/layer_census.h"
#include "census/output_census.h"
#include "census/selective_census.h"
#include "cli/report.h"
#include "step/step_census.h"
#include "plan/plan.h"
#include "cli/request.h"
#include "models/registry.h"

namespace {

census::ModelConfig shipped(const char* name) {
  auto config = census::cli::resolve_model(name);
  if (!config) throw std::runtime_error(config.refusal().message());
  return config.take();
}

void BM_LayerCensus(benchmark::State& state, const char* model) {
  const census::ModelConfig config = shipped(model);
  for (auto _ : state) benchmark::DoNotOptimize(census::census_layer(config, 0, state.range(0)));
}

void BM_SelectiveCensus(benchmark::State& state, const char* model) {
  const census::ModelConfig config = shipped(model);
  for (auto _ : state) benchmark::DoNotOptimize(census::census_selective(config, 0, state.range(0)));
}

void BM_OutputCensus(benchmark::State& state, const char* model) {
  const census::ModelConfig config = shipped(model);
  for (auto _ : state) benchmark::DoNotOptimize(census::census_output(config, state.range(0), config.vocab_size));
}

void BM_Activations(benchmark::State& state, const char* model) {
  const census::ModelConfig config = shipped(model);
  for (auto _ : state) benchmark::DoNotOptimize(census::census_activations(config, state.range(0)));
}

// The eager experts loop: one pass over the experts per layer, so its cost grows with their number.
void BM_LayerCensusEagerExperts(benchmark::State& state, const char* model) {
  census::ModelConfig config = shipped(model);
  config.moe.experts_implementation = census::nn::ExpertsImplementation::kEager;
  for (auto _ : state) benchmark::DoNotOptimize(census::census_layer(config, config.num_hidden_layers - 1, state.range(0)));
}

// Qwen3-Next-80B-A3B's shapes with every feed-forward dense (its MoE block is not priced yet): a
// linear-attention kind whose eager gated delta rule runs one step per 64-token chunk, and a full one.
census::ModelConfig qwen3_next_80b_dense() {
  nlohmann::json json = {{"model_type", "qwen3_next"}, {"hidden_size", 2048}, {"intermediate_size", 5120},
                         {"num_hidden_layers", 48}, {"num_attention_heads", 16}, {"num_key_value_heads", 2},
                         {"head_dim", 256}, {"linear_num_key_heads", 16}, {"linear_num_value_heads", 32},
                         {"linear_key_head_dim", 128}, {"linear_value_head_dim", 128}, {"vocab_size", 151936}};
  json["mlp_only_layers"] = nlohmann::json::array();
  for (int i = 0; i < 48; ++i) json["mlp_only_layers"].push_back(i);
  auto config = census::read_config(json);
  if (!config) throw std::runtime_error(config.refusal().message());
  return config.take();  // the eager rule, the runtime's default
}

void BM_Qwen3NextActivations(benchmark::State& state) {
  const census::ModelConfig config = qwen3_next_80b_dense();
  for (auto _ : state) benchmark::DoNotOptimize(census::census_activations(config, state.range(0)));
}

BENCHMARK(BM_Qwen3NextActivations)->Arg(4096)->Arg(32768)->Unit(benchmark::kMillisecond);
// The shipped checkpoint (its MoE block as it is) at 4096 tokens and at 1M: the chunk loop folded
// (Note [Alike iterations]) keeps the two apart by the sizes only, not by the chunks simulated.
BENCHMARK_CAPTURE(BM_Activations, qwen3_next_80b_a3b, "qwen3-next-80b-a3b")
    ->Arg(4096)
    ->Arg(1048576)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_LayerCensus, llama_3_1_8b, "llama-3.1-8b")->Arg(4096)->Arg(32768)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_LayerCensus, qwen3_8b, "qwen3-8b")->Arg(4096)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_SelectiveCensus, llama_3_1_8b, "llama-3.1-8b")->Arg(4096)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_OutputCensus, llama_3_1_8b, "llama-3.1-8b")->Arg(4096)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Activations, llama_3_1_8b, "llama-3.1-8b")->Arg(4096)->Arg(32768)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_LayerCensus, qwen3_30b_a3b, "qwen3-30b-a3b")->Arg(4096)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_LayerCensus, deepseek_v3_dense, "deepseek-v3")->Arg(4096)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Activations, deepseek_v3, "deepseek-v3")->Arg(4096)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Activations, mixtral_8x7b, "mixtral-8x7b")->Arg(4096)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Activations, gpt_oss_120b, "gpt-oss-120b")->Arg(4096)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_LayerCensusEagerExperts, qwen3_30b_a3b, "qwen3-30b-a3b")->Arg(4096)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_LayerCensusEagerExperts, deepseek_v3, "deepseek-v3")->Arg(4096)->Unit(benchmark::kMicrosecond);

// `census report llama-3.1-8b`: every census the page draws (the timeline, the layer kinds at TP 1 and
// 2, the output layer, the sweep from 1k to 128k tokens), the page rendered and written to a file.
void BM_Report(benchmark::State& state, const char* model) {
  census::cli::Request request;
  request.command = "report";
  request.model_name = model;
  request.config = shipped(model);
  request.seq_length = state.range(0);
  census::cli::ReportOptions options;
  options.output = (std::filesystem::temp_directory_path() / "census-bench-report.html").string();
  for (auto _ : state) {
    std::ostringstream out, err;
    if (census::cli::run_report(request, options, out, err) != 0) state.SkipWithError(err.str().c_str());
  }
  std::filesystem::remove(options.output);
}
BENCHMARK_CAPTURE(BM_Report, llama_3_1_8b, "llama-3.1-8b")->Arg(4096)->Unit(benchmark::kMillisecond);

}  // namespace

// `census step --pp 8 --micro-batches 16 --tp 8` at 4096 tokens with AdamW, the step benchmarks' run.
static census::StepOptions pp8_m16_tp8_step() {
  census::StepOptions options;
  options.seq_length = 4096;
  options.micro_batches = 16;
  options.pipeline_stages = 8;
  options.tensor_parallel = 8;
  options.optimizer = census::StepOptimizer::kAdamW;
  return options;
}

// One rank's whole step, as `census step llama-3.1-70b --pp 8 --micro-batches 16 --tp 8` runs it:
// every stage of the 1F1B pipeline (10 layers each, 16 micro-batches), AdamW.
void BM_StepAllStages(benchmark::State& state, const char* model) {
  const census::ModelConfig config = shipped(model);
  census::StepOptions options = pp8_m16_tp8_step();
  for (auto _ : state)
    for (int64_t stage = 0; stage < options.pipeline_stages; ++stage) {
      options.stage = stage;
      benchmark::DoNotOptimize(census::census_step(config, options));
    }
}
BENCHMARK_CAPTURE(BM_StepAllStages, llama_3_1_70b_pp8_m16_tp8, "llama-3.1-70b")->Unit(benchmark::kMillisecond);

// The same, every pass through the engine (census_step_op_by_op): what replaying later micro-batches'
// passes saves.
void BM_StepAllStagesOpByOp(benchmark::State& state, const char* model) {
  const census::ModelConfig config = shipped(model);
  census::StepOptions options = pp8_m16_tp8_step();
  for (auto _ : state)
    for (int64_t stage = 0; stage < options.pipeline_stages; ++stage) {
      options.stage = stage;
      benchmark::DoNotOptimize(census::census_step_op_by_op(config, options));
    }
}
BENCHMARK_CAPTURE(BM_StepAllStagesOpByOp, llama_3_1_70b_pp8_m16_tp8, "llama-3.1-70b")->Unit(benchmark::kMillisecond);

// One stage of it: the first (10 layers, the embedding, 8 micro-batches in flight at its peak).
void BM_StepFirstStage(benchmark::State& state, const char* model) {
  const census::ModelConfig config = shipped(model);
  census::StepOptions options = pp8_m16_tp8_step();
  for (auto _ : state) benchmark::DoNotOptimize(census::census_step(config, options));
}
BENCHMARK_CAPTURE(BM_StepFirstStage, llama_3_1_70b_pp8_m16_tp8, "llama-3.1-70b")->Unit(benchmark::kMillisecond);

// `census step llama-3.1-70b --tp 8 --sequence-parallel --loss-parallel --pp 4 --fsdp --dp 2` at 4096
// tokens with AdamW, every stage (20 layers each): DTensor's plan and FSDP2 run on the rank, their
// collectives as ops.
void BM_StepParallelAllStages(benchmark::State& state, const char* model) {
  const census::ModelConfig config = shipped(model);
  census::StepOptions options;
  options.seq_length = 4096;
  options.pipeline_stages = 4;
  options.tensor_parallel = 8;
  options.sequence_parallel = true;
  options.loss_parallel = true;
  options.fsdp.shards = 2;
  options.optimizer = census::StepOptimizer::kAdamW;
  for (auto _ : state)
    for (int64_t stage = 0; stage < options.pipeline_stages; ++stage) {
      options.stage = stage;
      benchmark::DoNotOptimize(census::census_step(config, options));
    }
}
BENCHMARK_CAPTURE(BM_StepParallelAllStages, llama_3_1_70b_tp8_sp_pp4_fsdp2, "llama-3.1-70b")->Unit(benchmark::kMillisecond);

// `census step llama-3.1-8b --seq-length 8192 --micro-batch-size 2 --fsdp --dp 8 --recompute selective`
// (torchtitan's Llama 3.1 8B run), with AdamW; FSDP2's units per layer and root, or torchtitan v0.2's
// (--fsdp-wrap torchtitan).
void BM_StepFsdp(benchmark::State& state, const char* model, census::FsdpWrap wrap) {
  const census::ModelConfig config = shipped(model);
  census::StepOptions options;
  options.seq_length = 8192;
  options.micro_batch_size = 2;
  options.fsdp.shards = 8;
  options.fsdp.wrap = wrap;
  options.recompute = census::Recompute::kSelective;
  options.optimizer = census::StepOptimizer::kAdamW;
  for (auto _ : state) benchmark::DoNotOptimize(census::census_step(config, options));
}
BENCHMARK_CAPTURE(BM_StepFsdp, llama_3_1_8b_fsdp8, "llama-3.1-8b", census::FsdpWrap::kLayers)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_StepFsdp, llama_3_1_8b_fsdp8_torchtitan_units, "llama-3.1-8b", census::FsdpWrap::kTorchtitan)
    ->Unit(benchmark::kMillisecond);

// The step a run is judged by against the first: `census step llama-3.1-8b` at 4096 tokens, 4
// micro-batches, AdamW. Arg 0: the first step with the for-loop AdamW (the states made in its optimizer
// step); 1: the steady state with the foreach AdamW (the default: the states made at the setup, one list
// of sqrt); 2: the steady state with the allocator (the first step walked first).
void BM_StepSteadyState(benchmark::State& state) {
  const census::ModelConfig config = shipped("llama-3.1-8b");
  census::StepOptions options;
  options.seq_length = 4096;
  options.micro_batches = 4;
  options.optimizer = census::StepOptimizer::kAdamW;
  options.first_step = state.range(0) == 0;
  options.optimizer_impl = state.range(0) == 0 ? census::nn::OptimizerImpl::kForLoop : census::nn::OptimizerImpl::kForEach;
  if (state.range(0) == 2) options.allocator = census::StepAllocatorOptions();
  for (auto _ : state) benchmark::DoNotOptimize(census::census_step(config, options));
}
BENCHMARK(BM_StepSteadyState)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);

// Each optimizer's steady step (step/optimizer_choice.h): `census step llama-3.1-8b --micro-batches 4
// --optimizer NAME` at 4096 tokens in its default form: its states made at the setup, its update op by op;
// and AdamW in the backward (one micro-batch, an optimizer a parameter).
void BM_StepOptimizer(benchmark::State& state, census::StepOptimizer optimizer, bool in_backward) {
  const census::ModelConfig config = shipped("llama-3.1-8b");
  census::StepOptions options;
  options.seq_length = 4096;
  options.micro_batches = in_backward ? 1 : 4;
  options.optimizer = optimizer;
  options.optimizer_in_backward = in_backward;
  for (auto _ : state) benchmark::DoNotOptimize(census::census_step(config, options));
}
BENCHMARK_CAPTURE(BM_StepOptimizer, sgd, census::StepOptimizer::kSGD, false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_StepOptimizer, adafactor, census::StepOptimizer::kAdafactor, false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_StepOptimizer, adamw8bit, census::StepOptimizer::kAdamW8bit, false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_StepOptimizer, paged_adamw8bit, census::StepOptimizer::kPagedAdamW8bit, false)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_StepOptimizer, torchao_adamw4bit, census::StepOptimizer::kTorchaoAdamW4bit, false)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_StepOptimizer, muon, census::StepOptimizer::kMuon, false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_StepOptimizer, adamw_in_backward, census::StepOptimizer::kAdamW, true)
    ->Unit(benchmark::kMillisecond);

// Each loss (nn/loss.h): `census step MODEL --seq-length 8192 --recompute full --loss NAME`. On Gemma-2-9B
// its 256,000-token vocabulary is the loss's most: the whole logits, TRL's 32 checkpointed chunks, or
// Liger's fused chunks. torchtune's losses run the bare head, which Gemma 2's softcapping refuses: they
// run on Llama-3.1-8B, beside hf there.
void BM_StepLoss(benchmark::State& state, census::nn::CausalLMLoss loss, const char* model) {
  const census::ModelConfig config = shipped(model);
  census::StepOptions options;
  options.seq_length = 8192;
  options.recompute = census::Recompute::kFull;
  options.optimizer = census::StepOptimizer::kAdamW;
  options.loss = loss;
  for (auto _ : state) benchmark::DoNotOptimize(census::census_step(config, options));
}
BENCHMARK_CAPTURE(BM_StepLoss, hf, census::nn::CausalLMLoss::kForCausalLM, "gemma-2-9b")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_StepLoss, trl_chunked_nll, census::nn::CausalLMLoss::kTrlChunkedNll, "gemma-2-9b")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_StepLoss, liger_flce, census::nn::CausalLMLoss::kLigerFlce, "gemma-2-9b")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_StepLoss, hf_llama, census::nn::CausalLMLoss::kForCausalLM, "llama-3.1-8b")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_StepLoss, torchtune_chunked, census::nn::CausalLMLoss::kTorchtuneChunked, "llama-3.1-8b")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_StepLoss, torchtune_linear, census::nn::CausalLMLoss::kTorchtuneLinear, "llama-3.1-8b")
    ->Unit(benchmark::kMillisecond);

// Activation offloading (autograd/offload_activations.h): `census step llama-3.1-8b --seq-length 8192
// --recompute R --offload-activations`, every save through the hooks where nothing is checkpointed (1,259
// packs), the layers' inputs and the loss's under full checkpointing (43); and without it, beside.
void BM_StepOffload(benchmark::State& state, census::Recompute recompute, bool offload) {
  const census::ModelConfig config = shipped("llama-3.1-8b");
  census::StepOptions options;
  options.seq_length = 8192;
  options.recompute = recompute;
  options.optimizer = census::StepOptimizer::kAdamW;
  if (offload) options.offload_activations = census::OffloadPolicy::kTrl;
  for (auto _ : state) benchmark::DoNotOptimize(census::census_step(config, options));
}
BENCHMARK_CAPTURE(BM_StepOffload, none, census::Recompute::kNone, false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_StepOffload, none_offloaded, census::Recompute::kNone, true)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_StepOffload, full_offloaded, census::Recompute::kFull, true)->Unit(benchmark::kMillisecond);

// Liger's kernels (nn/liger_kernels.h): `census step llama-3.1-8b --seq-length 8192 --liger`, its RMSNorm, SwiGLU
// and rotary in the layers and its fused loss; and Transformers' modules and loss beside.
void BM_StepLiger(benchmark::State& state, bool liger) {
  census::ModelConfig config = shipped("llama-3.1-8b");
  config.liger.rms_norm = config.liger.swiglu = config.liger.rope = liger;
  census::StepOptions options;
  options.seq_length = 8192;
  options.optimizer = census::StepOptimizer::kAdamW;
  options.loss = liger ? census::nn::CausalLMLoss::kLigerFlce : census::nn::CausalLMLoss::kForCausalLM;
  for (auto _ : state) benchmark::DoNotOptimize(census::census_step(config, options));
}
BENCHMARK_CAPTURE(BM_StepLiger, eager, false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_StepLiger, liger, true)->Unit(benchmark::kMillisecond);

// FSDP2's CPU offloading (step/fsdp.h): `census step llama-3.1-8b --seq-length 8192 --micro-batches 4 --fsdp
// --dp 8 --master-weights fp32 --cpu-offload`, the shards, gradients and AdamW on the host; and the same
// without the policy beside.
void BM_StepCpuOffload(benchmark::State& state, bool offload) {
  const census::ModelConfig config = shipped("llama-3.1-8b");
  census::StepOptions options;
  options.seq_length = 8192;
  options.micro_batches = 4;
  options.optimizer = census::StepOptimizer::kAdamW;
  options.fsdp.shards = 8;
  options.fsdp.mixed_precision = true;
  options.fsdp.cpu_offload = offload;
  for (auto _ : state) benchmark::DoNotOptimize(census::census_step(config, options));
}
BENCHMARK_CAPTURE(BM_StepCpuOffload, fsdp8, false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_StepCpuOffload, fsdp8_cpu_offload, true)->Unit(benchmark::kMillisecond);

// torchao's FP8 training, eager (ops/float8.cpp): `census step llama-3.1-8b --seq-length 8192 --fp8 RECIPE`,
// every Linear a Float8Linear; bf16 beside.
void BM_StepFloat8(benchmark::State& state, std::optional<census::ops::Float8Recipe> recipe) {
  const census::ModelConfig config = shipped("llama-3.1-8b");
  census::StepOptions options;
  options.seq_length = 8192;
  options.optimizer = census::StepOptimizer::kAdamW;
  options.fp8 = recipe;
  for (auto _ : state) benchmark::DoNotOptimize(census::census_step(config, options));
}
BENCHMARK_CAPTURE(BM_StepFloat8, bf16, std::nullopt)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_StepFloat8, tensorwise, census::ops::Float8Recipe::kTensorwise)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_StepFloat8, rowwise, census::ops::Float8Recipe::kRowwise)->Unit(benchmark::kMillisecond);

// PEFT's LoRA (nn/lora.h): `census step llama-3.1-8b --seq-length 2048 --micro-batch-size 4 --lora-rank 16
// --lora-targets all-linear [--recompute full]`, 224 adapted Linears, the base frozen; the full fine-tune beside;
// and QLoRA (nn/linear4bit.h), the same adapters over bitsandbytes' 4-bit base of the QLoRA recipe (nf4, double
// quantization, bf16 compute: `--quantize nf4 --double-quant --compute-dtype bf16`), each Linear's product the
// fallback's dequantized weight at 8,192 tokens.
enum class Tuning { kFull, kLora, kQlora };
// Llama-3.1-8B's step of 4 x 2,048 tokens with AdamW, all-linear adapters of rank 16 where `tuning` asks.
census::StepOptions fine_tuning_step(Tuning tuning, census::Recompute recompute) {
  census::StepOptions options;
  options.seq_length = 2048;
  options.micro_batch_size = 4;
  options.optimizer = census::StepOptimizer::kAdamW;
  options.recompute = recompute;
  if (tuning != Tuning::kFull) {
    census::nn::LoraConfig adapters;
    adapters.r = 16;
    adapters.all_linear = true;
    options.lora = adapters;
  }
  return options;
}
void BM_StepLora(benchmark::State& state, Tuning tuning, census::Recompute recompute) {
  const census::ModelConfig config = shipped("llama-3.1-8b");
  census::StepOptions options = fine_tuning_step(tuning, recompute);
  if (tuning == Tuning::kQlora) {
    census::nn::Bnb4bitConfig quantize;
    quantize.quant_type = census::nn::Bnb4bitType::kNf4;
    quantize.double_quant = true;
    quantize.compute_dtype = census::DType::kBFloat16;
    options.quantize = quantize;
  }
  for (auto _ : state) benchmark::DoNotOptimize(census::census_step(config, options));
}
BENCHMARK_CAPTURE(BM_StepLora, full_finetune, Tuning::kFull, census::Recompute::kNone)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_StepLora, all_linear_r16, Tuning::kLora, census::Recompute::kNone)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_StepLora, all_linear_r16_full_ac, Tuning::kLora, census::Recompute::kFull)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_StepLora, qlora_all_linear_r16, Tuning::kQlora, census::Recompute::kNone)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_StepLora, qlora_all_linear_r16_full_ac, Tuning::kQlora, census::Recompute::kFull)
    ->Unit(benchmark::kMillisecond);

// The HF Trainer's autocast (ops/autocast.h): `census step llama-3.1-8b --seq-length 2048 --micro-batch-size 4
// --autocast bf16 [--recompute full]`, the model loaded in fp32, every product's casts and the cast cache; and
// TRL's default LoRA run over it (all-linear r 16, checkpointing, its chunked loss). The bf16 step is
// BM_StepLora/full_finetune.
void BM_StepAutocast(benchmark::State& state, Tuning tuning, census::Recompute recompute) {
  const census::ModelConfig config = shipped("llama-3.1-8b");
  census::StepOptions options = fine_tuning_step(tuning, recompute);
  options.autocast = true;
  if (tuning == Tuning::kLora) options.loss = census::nn::CausalLMLoss::kTrlChunkedNll;
  for (auto _ : state) benchmark::DoNotOptimize(census::census_step(config, options));
}
BENCHMARK_CAPTURE(BM_StepAutocast, full_finetune, Tuning::kFull, census::Recompute::kNone)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_StepAutocast, full_finetune_full_ac, Tuning::kFull, census::Recompute::kFull)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_StepAutocast, trl_lora_all_linear_r16_full_ac, Tuning::kLora, census::Recompute::kFull)
    ->Unit(benchmark::kMillisecond);

// Flagship MoE steps, the whole rank through each family's own causal LM:
// `census step deepseek-v3 --micro-batches 32 --tp 8 --ep 8` (61 layers, 58 of them MoE, 4096 tokens,
// AdamW), and the first stage of `census step qwen3.5-397b-a17b --pp 4 --micro-batches 32 --tp 8 --ep 8`
// (15 layers: gated delta nets and gated attention, 512 experts).
void BM_StepFlagship(benchmark::State& state, const char* model, int64_t stages) {
  const census::ModelConfig config = shipped(model);
  census::StepOptions options;
  options.seq_length = 4096;
  options.micro_batches = 32;
  options.pipeline_stages = stages;
  options.tensor_parallel = 8;
  options.expert_parallel = 8;
  options.optimizer = census::StepOptimizer::kAdamW;
  for (auto _ : state) benchmark::DoNotOptimize(census::census_step(config, options));
}
BENCHMARK_CAPTURE(BM_StepFlagship, deepseek_v3_m32_tp8_ep8, "deepseek-v3", 1)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_StepFlagship, qwen3_5_397b_a17b_pp4_m32_tp8_ep8, "qwen3.5-397b-a17b", 4)
    ->Unit(benchmark::kMillisecond);

// The caching allocator over a step (census step --allocator), beside the same step without it: the
// allocator may add at most 20 % to a step's time. Arg 0: the plain step; 1: with the allocator.
//   llama-3.1-8b --seq-length 16384 --dp 8 --zero 3 --recompute selective --master-weights fp32
//     --grad-dtype fp32: one micro-batch, every storage composed (ZeRO-3 shards, fp32 states and grads)
static census::StepOptions llama8b_zero3_step(bool allocator) {
  census::StepOptions o;
  o.seq_length = 16384;
  o.recompute = census::Recompute::kSelective;
  o.optimizer = census::StepOptimizer::kAdamW;
  o.composition.data_parallel = 8;
  o.composition.zero = 3;
  o.composition.fp32_master_weights = true;
  o.composition.fp32_gradients = true;
  if (allocator) o.allocator = census::StepAllocatorOptions();
  return o;
}
void BM_StepAllocatorLlama8bZero3(benchmark::State& state) {
  const census::ModelConfig config = shipped("llama-3.1-8b");
  const census::StepOptions options = llama8b_zero3_step(state.range(0) != 0);
  for (auto _ : state) benchmark::DoNotOptimize(census::census_step(config, options));
}
BENCHMARK(BM_StepAllocatorLlama8bZero3)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

//   llama-3.1-70b --pp 8 --micro-batches 64 --tp 8 at 4096 tokens, one stage of the 1F1B pipeline (arg
//   1: 0 the first, 7 the last), 62 of the 64 micro-batches' passes replayed: the step folds each
//   replay; the allocator skips the steady ones only where it comes back to where it was a period
//   before (Note [Repeating replays]): the last stage does, the first (7 micro-batches in flight, its
//   free blocks drifting from one period to the next) does not, so it runs all 128 passes' events.
void BM_StepAllocatorPipelineStage(benchmark::State& state) {
  const census::ModelConfig config = shipped("llama-3.1-70b");
  census::StepOptions options = pp8_m16_tp8_step();
  options.micro_batches = 64;
  options.stage = state.range(1);
  if (state.range(0) != 0) options.allocator = census::StepAllocatorOptions();
  for (auto _ : state) benchmark::DoNotOptimize(census::census_step(config, options));
}
BENCHMARK(BM_StepAllocatorPipelineStage)->Args({0, 0})->Args({1, 0})->Args({0, 7})->Args({1, 7})->Unit(benchmark::kMillisecond);

// A whole `census plan` search: every layout enumerated and bounded, the promising ones estimated, then
// simulated in order of the estimate until the top 5 that fit (counters, per second of wall time: layouts
// that passed the divisibility rules, and stage steps simulated). Target (issue: any supported model on up
// to 16,384 GPUs under a second): Llama-3.1-70B on 64 H100s, Qwen3-235B-A22B on 256, DeepSeek-V3 on
// 2,048 at 15,360 sequences a step.
void BM_Plan(benchmark::State& state, const char* model, int64_t gpus, int64_t global_batch, bool search = false) {
  const census::ModelConfig config = shipped(model);
  census::PlanOptions options;
  if (search) {  // --search loss,optimizer
    options.search_losses = census::searched_losses();
    options.search_optimizers = census::searched_optimizers();
  }
  options.run.gpus = gpus;
  options.run.seq_length = 4096;
  options.run.global_batch = global_batch;
  options.gpu_memory = 80LL << 30;
  options.device = *census::find_device("h100");
  int64_t tried = 0, stage_runs = 0;
  for (auto _ : state) {
    auto plan = census::census_plan(config, options);
    if (!plan) throw std::runtime_error(plan.refusal().message());
    tried += plan->counts.tried - plan->counts.pruned_divisibility;
    stage_runs += plan->counts.stage_runs;
  }
  state.counters["layouts_per_s"] = benchmark::Counter(static_cast<double>(tried), benchmark::Counter::kIsRate);
  state.counters["stage_runs_per_s"] = benchmark::Counter(static_cast<double>(stage_runs), benchmark::Counter::kIsRate);
}
BENCHMARK_CAPTURE(BM_Plan, llama_3_1_70b_64_h100, "llama-3.1-70b", 64, 64)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Plan, qwen3_235b_a22b_256_h100, "qwen3-235b-a22b", 256, 256)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Plan, deepseek_v3_2048_h100, "deepseek-v3", 2048, 15360)->Unit(benchmark::kMillisecond)->UseRealTime();
// Linear-attention (gated delta net) layers, the costliest steps to simulate per layer.
BENCHMARK_CAPTURE(BM_Plan, qwen3_next_80b_a3b_64_h100, "qwen3-next-80b-a3b", 64, 64)->Unit(benchmark::kMillisecond)->UseRealTime();
// Its layers cannot run alone: every (TP, EP, tokens) the search prices runs the model's forward twice.
BENCHMARK_CAPTURE(BM_Plan, deepseek_v4_flash_256_h100, "deepseek-v4-flash", 256, 256)->Unit(benchmark::kMillisecond)->UseRealTime();
// The largest runs the search answers for: every shape of 16,384 GPUs at a sequence a GPU.
BENCHMARK_CAPTURE(BM_Plan, qwen3_next_80b_a3b_16384_h100, "qwen3-next-80b-a3b", 16384, 16384)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Plan, deepseek_v4_flash_16384_h100, "deepseek-v4-flash", 16384, 16384)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Plan, kimi_k2_16384_h100, "kimi-k2-instruct", 16384, 16384)->Unit(benchmark::kMillisecond)->UseRealTime();
// A fine-tuner's plan (`census plan qwen3-8b --gpus 1 --gpu-memory 24GiB --seq-length 2048 --global-batch 8
// --lora-rank 16 --lora-targets all-linear --quantize nf4 --double-quant --compute-dtype bf16`): b 1 to 8
// under no and full checkpointing, every layout simulated (no memory bound holds beside a frozen base).
void BM_PlanQlora(benchmark::State& state) {
  const census::ModelConfig config = shipped("qwen3-8b");
  census::PlanOptions options;
  options.run.gpus = 1;
  options.run.seq_length = 2048;
  options.run.global_batch = 8;
  census::nn::LoraConfig adapters;
  adapters.r = 16;
  adapters.all_linear = true;
  options.run.lora = adapters;
  census::nn::Bnb4bitConfig quantize;
  quantize.quant_type = census::nn::Bnb4bitType::kNf4;
  quantize.double_quant = true;
  quantize.compute_dtype = census::DType::kBFloat16;
  options.run.quantize = quantize;
  options.gpu_memory = 24LL << 30;
  options.device = *census::find_device("h100");
  for (auto _ : state) {
    auto plan = census::census_plan(config, options);
    if (!plan) throw std::runtime_error(plan.refusal().message());
    benchmark::DoNotOptimize(plan->top.size());
  }
}
BENCHMARK(BM_PlanQlora)->Unit(benchmark::kMillisecond)->UseRealTime();
// --search loss,optimizer: 25 combinations, the later ones cut to what beats the top found so far.
BENCHMARK_CAPTURE(BM_Plan, llama_3_1_70b_64_h100_search, "llama-3.1-70b", 64, 64, true)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Plan, qwen3_235b_a22b_256_h100_search, "qwen3-235b-a22b", 256, 256, true)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

BENCHMARK_MAIN();
