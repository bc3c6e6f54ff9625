// File: trl_yaml.h
// The YAML config of TRL's `trl sft --config FILE` (huggingface/trl f2cd577, its TrlParser over ScriptArguments,
// SFTConfig with Transformers 5's TrainingArguments, ModelConfig and DatasetMixtureConfig, their fields side by
// side), on one GPU. What each field makes of the run (CUDA's kernels: --kernels cuda):
//   model_name_or_path                a shipped config of the hub's model (meta-llama/Llama-3.1-8B, Qwen/Qwen3-8B,
//                                     ...), or the step's CONFIG argument beside the file
//   max_length (1024)                 --seq-length: the longest a padded batch can be; null: --seq-length beside
//   per_device_train_batch_size (8), gradient_accumulation_steps (1)   --micro-batch-size, --micro-batches
//   bf16 (TRL: True unless fp16)      --autocast bf16: accelerate's autocast around the forward
//   dtype (ModelConfig: float32)      --load-dtype: float32, or bfloat16 and auto (a bf16 checkpoint's)
//   gradient_checkpointing (TRL: True), gradient_checkpointing_kwargs.use_reentrant   --recompute full or
//                                     full-reentrant
//   optim (adamw_torch_fused)         --optimizer and --optimizer-impl: adamw_torch (foreach), adamw_torch_fused,
//                                     adamw_bnb_8bit and adamw_8bit, paged_adamw_8bit, adamw_torch_8bit and _4bit
//                                     (torchao's), sgd
//   loss_type (chunked_nll; nll with use_liger_kernel)   --loss trl-chunked-nll or hf
//   use_peft, lora_r (16), lora_alpha (32), lora_dropout (0.05), lora_target_modules, use_dora   --lora-*
//   load_in_4bit, bnb_4bit_quant_type (nf4), use_bnb_nested_quant, bnb_4bit_quant_storage   --quantize ...,
//                                     its compute dtype the load dtype (get_quantization_config)
//   activation_offloading             --offload-activations trl
//   use_liger_kernel                  --liger
// Every other field moves no memory of the step, acts between steps, or is refused by name where it changes
// what runs (torch_compile, fsdp, deepspeed, packing, padding_free, neftune_noise_alpha, fp16, ...).
#pragma once

#include <string>

#include "run/trainer_file.h"
#include "util/result.h"

namespace census {

// The run of a `trl sft` config's `text`; `path` names the file in a refusal.
Result<TrainerFile> read_trl_yaml(const std::string& text, const std::string& path, const TrainerFileContext& context);

}  // namespace census
