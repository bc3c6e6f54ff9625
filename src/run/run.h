// File: run.h
// A training run as Census prices it: the model, the data, the parallel layout, the precision, the
// optimizer, the memory techniques, the adapters, the loss and the kernels. The command line's flags
// are one reader of a Run (cli/step_command.h); a trainer's own config file is another
// (run/trainer_file.h). Each field is named after the `census step` flag that sets it, and holds that
// flag's text, so that a Run prints back as the flags that make it (step_flags).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

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
// The most tokens a sequence has: 2^32, as a config's sizes are (a model's counts may refuse fewer).
inline constexpr int64_t kLargestSeqLength = int64_t{1} << 32;

struct Run {
  // The model: a shipped model's name (census models) or a config.json path.
  std::string model;
  // The data: tokens per sequence, sequences per micro-batch, micro-batches accumulated per step.
  int64_t seq_length = 4096;
  int64_t micro_batch_size = 1;
  int64_t micro_batches = 1;
  // The pipeline.
  int64_t pp = 1;
  std::string schedule = "1f1b";
  int64_t virtual_stages = 1;
  int64_t first_stage_layers = 0;  // 0: not set (step/pipeline_split.h)
  int64_t last_stage_layers = 0;
  bool embedding_as_layer = false;
  bool loss_as_layer = false;
  // Memory techniques.
  std::string recompute = "none";  // a mode, or a mode per layer kind (step/recompute_choice.h)
  std::string offload_activations;  // "trl" or "torchtune"'s OffloadActivations; empty: none
  // The optimizer.
  std::string optimizer = "adamw";
  std::string optimizer_impl;          // foreach, fused, for-loop; empty: the optimizer's default on CUDA
  bool optimizer_in_backward = false;  // torchtune's optimizer_in_bwd, torchtitan's early_step_in_backward
  bool first_step = false;             // the first step, whose optimizer makes its states; else the steady state
  // The loss and the kernels.
  std::string loss;  // hf, trl-chunked-nll, ... (nn/loss.h); empty: hf, or liger-flce with --liger
  bool liger = false;            // Liger's kernels as its patch applies them (nn/liger_kernels.h)
  std::string fp8;               // torchao's Float8Linear recipe (nn/float8_training.h); empty: bf16
  bool fp8_skip_head = false;    // the LM head left bf16
  std::string experts_implementation;
  // The HF Trainer's bf16=True on a model loaded in fp32: accelerate's autocast around the forward and its
  // fp32 copy of the outputs (ops/autocast.h). bf16; empty: none.
  std::string autocast;
  // The dtype the model is loaded in (from_pretrained's dtype): fp32 (the default under autocast) or bf16
  // (Transformers 5's dtype="auto" on a bf16 checkpoint, as TRL loads it); empty: the default.
  std::string load_dtype;
  std::string kernels;     // the kernel profile (npu, cuda); empty: npu
  std::string train_yaml;  // a HyperParallel train.yaml whose fused modules the trainer builds
  // PEFT's LoRA (nn/lora.h): on with `lora` or any lora_* field; each left out is LoraConfig's default.
  bool lora = false;
  std::optional<int64_t> lora_rank;    // r (8)
  std::optional<double> lora_alpha;    // lora_alpha (8)
  std::optional<double> lora_dropout;  // lora_dropout (0)
  std::string lora_targets;            // default (the model type's), all-linear, or names, comma-separated
  std::string lora_dtype;              // fp32 (autocast_adapter_dtype=True, the default) or bf16
  bool use_dora = false;               // LoraConfig's use_dora
  std::string modules_to_save;         // LoraConfig's modules_to_save: lm_head, embed_tokens, comma-separated
  // bitsandbytes' 4-bit base (nn/linear4bit.h): on with `quantize`; each other field left out is
  // BitsAndBytesConfig's default.
  std::string quantize;       // nf4 or fp4 (bnb_4bit_quant_type); empty: a bf16 base
  bool double_quant = false;  // bnb_4bit_use_double_quant
  std::string quant_storage;  // uint8 (the default), bf16 or fp32 (bnb_4bit_quant_storage)
  std::string compute_dtype;  // fp32 (the default) or bf16 (bnb_4bit_compute_dtype)
  std::string bnb_version;    // 0.50 (the default) or 0.49: how matmul_4bit dequantizes
  bool prepare_kbit = false;  // PEFT's prepare_model_for_kbit_training's casts
  // The parallel layout and the precision of the weights, gradients and states.
  int64_t tp = 1;
  int64_t dp = 1;
  int64_t zero = 0;
  bool fsdp = false;                               // FSDP2 over dp ranks, run on the rank
  bool cpu_offload = false;                        // FSDP2's CPUOffloadPolicy
  bool sequence_parallel = false;                  // DTensor's TP plan with SequenceParallel
  bool loss_parallel = false;                      // loss_parallel: the vocabulary-sharded loss
  int64_t world = 0;                               // 0: not stated; else dp x tp x pp x cp must equal it
  std::string reshard_after_forward = "default";  // FSDP2's: default (the wrapping's own), true, false
  std::string fsdp_wrap;                           // FSDP2's units: layers (empty, the default) or torchtitan (v0.2's)
  int64_t cp = 1;
  int64_t ep = 1;
  int64_t expert_tp = 0;  // 0: tp
  std::string master_weights = "bf16";
  std::string grad_dtype = "bf16";
  // What the run's machine adds to the step's peak.
  int64_t cuda_context = 0;
  int64_t nccl_buffers = 0;
  int64_t fragmentation = 0;
};

// The `census step` arguments that make `run`: its model, then a flag for each field that differs from
// a default Run, in the order of the fields above. Parsed by the command line, they give `run` back.
std::vector<std::string> step_flags(const Run& run);

// The same as one line a shell reads back: each argument quoted where it needs to be.
std::string step_command_line(const Run& run);

}  // namespace census
