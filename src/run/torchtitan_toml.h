// File: torchtitan_toml.h
// torchtitan's TOML job config, as its releases v0.1 (f7084fc) and v0.2 (29624e3) ship them
// (torchtitan/config_manager.py, then torchtitan/config/job_config.py): the sections [job] through
// [validation], [float8] (v0.1) or [quantize.linear.float8] (v0.2). Later torchtitan builds its config
// in Python, which is not read.
//
// What the run is, as torchtitan's train.py and parallelize_llama build it (on CUDA: --kernels cuda):
//   [training] local_batch_size, seq_len         --micro-batch-size, --seq-length
//   global_batch_size                             --micro-batches: global / (local x data-parallel ranks)
//   [parallelism] data_parallel_shard_degree      --fsdp --dp N (-1: the GPUs --world gives, over the
//                                                 other degrees); FSDP2 with MixedPrecisionPolicy(bf16,
//                                                 fp32) over fp32 parameters (training.dtype float32,
//                                                 its default): --master-weights fp32
//   FSDP2's units                                 v0.1: each block, then the root (--fsdp-wrap layers);
//                                                 v0.2: the embedding, each block, the norm with the head,
//                                                 then the root (--fsdp-wrap torchtitan; beside TP or CPU
//                                                 offloading, the layers' units, every block resharded)
//   fsdp_reshard_after_forward                    default: the wrapping's own; always: true; never: false
//   tensor_parallel_degree                        --tp T --sequence-parallel, and --loss-parallel
//                                                 unless disable_loss_parallel
//   training.enable_cpu_offload                   --cpu-offload
//   [activation_checkpoint] mode                  none; full; selective with selective_ac_option "op"
//                                                 (torchtitan-op) or N (torchtitan-layer:N)
//   [optimizer] name AdamW, implementation        --optimizer adamw --optimizer-impl (fused by default);
//   early_step_in_backward                        --optimizer-in-backward
//   model.converters float8 (v0.1) or             --fp8 (recipe_name: tensorwise by default, rowwise,
//   quantize.linear.float8 (v0.2)                 rowwise-gw-hp); filter_fqns ["output"]: --fp8-skip-head
//   model.name, model.flavor                      a shipped config: llama3 8B and 70B (Llama 3.1),
//                                                 qwen3 8B and 32B; any other needs its config.json
// Census runs Transformers' modeling of the named architecture: torchtitan's own model files (its
// rotary embedding in complex fp32, for one) are not what Census re-runs.
#pragma once

#include <string>

#include "run/trainer_file.h"
#include "util/result.h"

namespace census {

// The run of a torchtitan job config's `text`; `path` names the file in a refusal.
Result<TrainerFile> read_torchtitan_toml(const std::string& text, const std::string& path,
                                         const TrainerFileContext& context);

}  // namespace census
