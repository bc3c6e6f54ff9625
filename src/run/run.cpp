#include "run/run.h"

#include <cstdio>
#include <cstdlib>

namespace census {
namespace {

// A number as the command line reads it back: the shortest text that parses to the same double.
std::string number_text(double value) {
  char text[32];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, value);
    if (std::strtod(text, nullptr) == value) break;
  }
  return text;
}

// A word a POSIX shell reads as itself, else the word in single quotes (each ' closed, escaped, reopened).
std::string shell_word(const std::string& word) {
  const bool plain = !word.empty() && word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                             "0123456789-_.,:=/+@%") == std::string::npos;
  if (plain) return word;
  std::string quoted = "'";
  for (const char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

}  // namespace

std::vector<std::string> step_flags(const Run& r) {
  const Run d;
  std::vector<std::string> flags{r.model};
  const auto text = [&](const char* flag, const std::string& value, const std::string& left_out) {
    if (value != left_out) flags.insert(flags.end(), {flag, value});
  };
  const auto integer = [&](const char* flag, int64_t value, int64_t left_out) {
    if (value != left_out) flags.insert(flags.end(), {flag, std::to_string(value)});
  };
  const auto flag = [&](const char* name, bool on) {
    if (on) flags.emplace_back(name);
  };
  integer("--seq-length", r.seq_length, d.seq_length);
  integer("--micro-batch-size", r.micro_batch_size, d.micro_batch_size);
  integer("--micro-batches", r.micro_batches, d.micro_batches);
  integer("--pp", r.pp, d.pp);
  text("--schedule", r.schedule, d.schedule);
  integer("--virtual-stages", r.virtual_stages, d.virtual_stages);
  integer("--first-stage-layers", r.first_stage_layers, d.first_stage_layers);
  integer("--last-stage-layers", r.last_stage_layers, d.last_stage_layers);
  flag("--embedding-as-layer", r.embedding_as_layer);
  flag("--loss-as-layer", r.loss_as_layer);
  text("--recompute", r.recompute, d.recompute);
  text("--offload-activations", r.offload_activations, d.offload_activations);
  text("--optimizer", r.optimizer, d.optimizer);
  text("--optimizer-impl", r.optimizer_impl, d.optimizer_impl);
  flag("--optimizer-in-backward", r.optimizer_in_backward);
  flag("--first-step", r.first_step);
  text("--loss", r.loss, d.loss);
  flag("--liger", r.liger);
  text("--fp8", r.fp8, d.fp8);
  flag("--fp8-skip-head", r.fp8_skip_head);
  text("--experts-implementation", r.experts_implementation, d.experts_implementation);
  text("--autocast", r.autocast, d.autocast);
  text("--load-dtype", r.load_dtype, d.load_dtype);
  text("--kernels", r.kernels, d.kernels);
  text("--train-yaml", r.train_yaml, d.train_yaml);
  flag("--lora", r.lora);
  if (r.lora_rank) integer("--lora-rank", *r.lora_rank, -1);
  if (r.lora_alpha) flags.insert(flags.end(), {"--lora-alpha", number_text(*r.lora_alpha)});
  if (r.lora_dropout) flags.insert(flags.end(), {"--lora-dropout", number_text(*r.lora_dropout)});
  text("--lora-targets", r.lora_targets, d.lora_targets);
  text("--lora-dtype", r.lora_dtype, d.lora_dtype);
  flag("--use-dora", r.use_dora);
  text("--modules-to-save", r.modules_to_save, d.modules_to_save);
  text("--quantize", r.quantize, d.quantize);
  flag("--double-quant", r.double_quant);
  text("--quant-storage", r.quant_storage, d.quant_storage);
  text("--compute-dtype", r.compute_dtype, d.compute_dtype);
  text("--bnb-version", r.bnb_version, d.bnb_version);
  flag("--prepare-kbit", r.prepare_kbit);
  integer("--tp", r.tp, d.tp);
  integer("--dp", r.dp, d.dp);
  integer("--zero", r.zero, d.zero);
  flag("--fsdp", r.fsdp);
  flag("--cpu-offload", r.cpu_offload);
  flag("--sequence-parallel", r.sequence_parallel);
  flag("--loss-parallel", r.loss_parallel);
  integer("--world", r.world, d.world);
  text("--reshard-after-forward", r.reshard_after_forward, d.reshard_after_forward);
  text("--fsdp-wrap", r.fsdp_wrap, d.fsdp_wrap);
  integer("--cp", r.cp, d.cp);
  integer("--ep", r.ep, d.ep);
  integer("--expert-tp", r.expert_tp, d.expert_tp);
  text("--master-weights", r.master_weights, d.master_weights);
  text("--grad-dtype", r.grad_dtype, d.grad_dtype);
  integer("--cuda-context", r.cuda_context, d.cuda_context);
  integer("--nccl-buffers", r.nccl_buffers, d.nccl_buffers);
  integer("--fragmentation", r.fragmentation, d.fragmentation);
  return flags;
}

std::string step_command_line(const Run& run) {
  std::string line = "census step";
  for (const std::string& word : step_flags(run)) line += " " + shell_word(word);
  return line;
}

}  // namespace census
