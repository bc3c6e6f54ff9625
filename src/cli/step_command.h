// File: step_command.h
// `census step CONFIG ...`: one rank's whole training step (step/step_census.h), with the composed
// terms (step/step_compose.h) and the user's overhead terms, as a table or as JSON in the step
// oracle's names.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "models/config.h"
#include "util/result.h"

namespace census::cli {

struct StepArgs {
  std::string model;
  int64_t seq_length = 4096;
  int64_t micro_batch_size = 1;
  int64_t micro_batches = 1;
  int64_t pp = 1;
  std::optional<int64_t> stage;  // not given: every stage
  std::string schedule = "1f1b";
  int64_t virtual_stages = 1;
  int64_t first_stage_layers = 0;  // 0: not set (step/pipeline_split.h)
  int64_t last_stage_layers = 0;
  bool embedding_as_layer = false;
  bool loss_as_layer = false;
  std::string recompute = "none";  // a mode, or a mode per layer kind (step/recompute_choice.h)
  std::string optimizer = "adamw";
  std::string optimizer_impl;  // foreach, fused, for-loop; empty: the optimizer's default on CUDA
  bool optimizer_in_backward = false;  // torchtune's optimizer_in_bwd
  std::string loss;            // hf, trl-chunked-nll, ... (nn/loss.h); empty: hf, or liger-flce with --liger
  bool first_step = false;     // the first step, whose optimizer makes its states; else the steady state
  std::string offload_activations;  // "trl" or "torchtune"'s OffloadActivations; empty: none
  bool liger = false;               // Liger's kernels as its patch applies them (nn/liger_kernels.h)
  std::string fp8;                  // torchao's Float8Linear recipe (nn/float8_training.h); empty: bf16
  bool fp8_skip_head = false;       // the LM head left bf16
  // PEFT's LoRA (nn/lora.h): on with --lora or any --lora-* option; each left out is LoraConfig's default.
  bool lora = false;
  std::optional<int64_t> lora_rank;     // r (8)
  std::optional<double> lora_alpha;     // lora_alpha (8)
  std::optional<double> lora_dropout;   // lora_dropout (0)
  std::string lora_targets;             // default (the model type's), all-linear, or names, comma-separated
  std::string lora_dtype;               // fp32 (autocast_adapter_dtype=True, the default) or bf16
  bool use_dora = false;                // LoraConfig's use_dora
  // bitsandbytes' 4-bit base (nn/linear4bit.h): on with --quantize; each other option left out is
  // BitsAndBytesConfig's default.
  std::string quantize;                 // nf4 or fp4 (bnb_4bit_quant_type); empty: a bf16 base
  bool double_quant = false;            // bnb_4bit_use_double_quant
  std::string quant_storage;            // uint8 (the default), bf16 or fp32 (bnb_4bit_quant_storage)
  std::string compute_dtype;            // fp32 (the default) or bf16 (bnb_4bit_compute_dtype)
  std::string bnb_version;              // 0.50 (the default) or 0.49: how matmul_4bit dequantizes
  bool prepare_kbit = false;            // PEFT's prepare_model_for_kbit_training's casts
  int64_t tp = 1;
  int64_t dp = 1;
  int64_t zero = 0;
  bool fsdp = false;                               // FSDP2 over --dp ranks, run on the rank
  bool cpu_offload = false;                        // FSDP2's CPUOffloadPolicy
  bool sequence_parallel = false;                  // DTensor's TP plan with SequenceParallel
  bool loss_parallel = false;                      // loss_parallel: the vocabulary-sharded loss
  int64_t world = 0;                               // 0: not stated; else dp x tp x pp x cp must equal it
  std::string reshard_after_forward = "default";  // FSDP2's: default (every layer but the last), true, false
  int64_t cp = 1;
  int64_t ep = 1;
  int64_t expert_tp = 0;  // 0: --tp
  std::string master_weights = "bf16";
  std::string grad_dtype = "bf16";
  std::string experts_implementation;
  std::string kernels;     // the kernel profile (npu, cuda); empty: npu
  std::string train_yaml;  // a HyperParallel train.yaml whose fused modules the trainer builds
  int64_t cuda_context = 0;
  int64_t nccl_buffers = 0;
  int64_t fragmentation = 0;
  std::string format = "table";
  bool explain = false;
  // PyTorch's caching allocator over the step (cli/step_allocator.h)
  bool allocator = false;
  std::string alloc_conf;
  std::string gpu_memory;
};

CLI::App* add_step_command(CLI::App& app, StepArgs& args);
// Run a parsed `census step`: 0, or 2 with one line on `err` for input it refuses.
int run_step_command(const StepArgs& args, std::ostream& out, std::ostream& err);

// The step of `config` as `args` ask (args.model only names it), as the JSON `--format json` prints:
// one stage's object, or {"stages": [...], "worst_stage", "total_bytes"} for every stage. Refused: an
// option value the step does not know, or what census_step refuses.
Result<nlohmann::ordered_json> step_report_json(const StepArgs& args, const ModelConfig& config);

}  // namespace census::cli
