// File: torchtune_yaml.h
// A torchtune recipe config (YAML), as torchtune v0.6.1 (a6290a5) ships them for its full-finetune
// recipes: full_finetune_single_device on one GPU (--world 1, or left out), full_finetune_distributed on
// more. What each key makes of the run (device cuda: --kernels cuda):
//   model._component_                 a shipped config of the builder's architecture (llama3_1_8b, 70b;
//                                     qwen2_5_7b_base, _instruct; gemma2_9b, 27b; phi4_14b); torchtune's
//                                     LoRA and QLoRA builders (its own LoRALinear) are refused
//   tokenizer.max_seq_len             --seq-length: a packed dataset's length, else the longest a padded
//                                     batch can be; where it is null, --seq-length beside the file
//   batch_size, gradient_accumulation_steps    --micro-batch-size, --micro-batches
//   dtype bf16                        the bf16 model, gradients and states (Census's step)
//   enable_activation_checkpointing   --recompute full (checkpoint_wrapper on each decoder layer)
//   enable_activation_offloading      --offload-activations torchtune
//   optimizer._component_, fused, foreach      --optimizer (torch.optim.AdamW, bitsandbytes' AdamW8bit and
//                                     PagedAdamW8bit, torchao's AdamW8bit and AdamW4bit), --optimizer-impl
//   optimizer_in_bwd                  --optimizer-in-backward
//   loss._component_                  CEWithChunkedOutputLoss: --loss torchtune-chunked;
//                                     LinearCrossEntropyLoss: torchtune-linear
//   on N GPUs: shard_model            --fsdp --dp N: each decoder layer and the root, bf16 shards without a
//                                     mixed-precision policy, fsdp_reshard_after_forward (True: --reshard-after-
//                                     forward true), fsdp_cpu_offload (--cpu-offload)
#pragma once

#include <string>

#include "run/trainer_file.h"
#include "util/result.h"

namespace census {

// The run of a torchtune recipe config's `text`; `path` names the file in a refusal.
Result<TrainerFile> read_torchtune_yaml(const std::string& text, const std::string& path,
                                        const TrainerFileContext& context);

}  // namespace census
