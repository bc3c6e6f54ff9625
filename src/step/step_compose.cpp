#include "step/step_compose.h"

namespace census {

StepWeights step_weights(const StepComposition& c) {
  StepWeights w;
  auto at = [&](StepCategory category) -> Share& { return w.by_category[static_cast<size_t>(category)]; };
  // ZeRO shards over every rank that holds the same parameters: the data-parallel ranks and, under
  // context parallelism, the context-parallel ranks with them (Megatron's distributed optimizer over
  // its data-and-context-parallel group, DeepSpeed's over the sequence-data-parallel group).
  const int64_t d = c.data_parallel * c.context_parallel;
  if (c.fp32_master_weights) {
    at(StepCategory::kOptimizerStates).num *= 3;
    w.optimizer_temporaries.num *= 2;
  }
  if (c.fp32_gradients) at(StepCategory::kGradients).num *= 2;
  if (c.zero >= 1) {
    at(StepCategory::kOptimizerStates).den *= d;
    w.optimizer_temporaries.den *= d;  // the update runs on the rank's shard
  }
  if (c.zero >= 2) at(StepCategory::kGradients).den *= d;
  if (c.zero >= 3) {
    at(StepCategory::kParameters).den *= d;
    w.during_passes = 2 * c.largest_layer_parameter_bytes;
  }
  if (c.context_parallel > 1) w.during_passes += c.ring_kv_bytes;
  return w;
}

std::vector<ComposedTerm> composed_terms(const StepComposition& c, const StepMoment& composed) {
  std::vector<ComposedTerm> terms;
  const std::string d = c.context_parallel > 1 ? std::to_string(c.data_parallel) + " x " +
                                                    std::to_string(c.context_parallel) + " (DP x CP)"
                                              : std::to_string(c.data_parallel);
  std::string p = "simulated (the stage's bf16 parameters)";
  if (c.zero >= 3) p += " / " + d + " (ZeRO-3: parameters sharded over DP)";
  terms.push_back({"parameters", p, composed.split.parameters()});
  std::string g = "simulated (bf16 .grad)";
  if (c.fp32_gradients) g += " x 2 (fp32 main_grad: 4 B per parameter)";
  if (c.zero >= 2) g += " / " + d + " (ZeRO-2: gradients sharded over DP)";
  terms.push_back({"gradients", g, composed.split.gradients()});
  std::string o = "simulated (the optimizer's states, as it makes them)";
  if (c.fp32_master_weights) o += " x 3 (fp32 master weights + fp32 moments: 12 B per parameter)";
  if (c.zero >= 1) o += " / " + d + " (ZeRO-1: optimizer states sharded over DP)";
  terms.push_back({"optimizer_states", o, composed.split.optimizer_states()});
  std::string other = "simulated (activations, inputs, in-flight gradients, buffers)";
  if (c.fp32_master_weights || c.zero >= 1) other += "; the optimizer update's temporaries";
  if (c.fp32_master_weights) other += " x 2 (fp32)";
  if (c.zero >= 1) other += " / " + d + " (on the rank's shard)";
  if (c.zero >= 3)
    other += "; + 2 x " + std::to_string(c.largest_layer_parameter_bytes) +
             " (ZeRO-3: the gathered layer and the prefetched one, during every pass)";
  if (c.context_parallel > 1)
    other += "; + " + std::to_string(c.ring_kv_bytes) + " = (" + std::to_string(c.context_parallel) +
             " - 1) x S/" + std::to_string(c.context_parallel) +
             " x b x 2 x KV heads x head_dim x 2 B (CP: the other shards' K/V the ring attention receives, during every pass)";
  terms.push_back({"other", other, composed.split.other()});
  terms.push_back({"cuda_context", "set by --cuda-context (default 0)", c.cuda_context});
  terms.push_back({"nccl_buffers", "set by --nccl-buffers (default 0)", c.nccl_buffers});
  terms.push_back({"fragmentation", "set by --fragmentation (default 0)", c.fragmentation});
  return terms;
}

}  // namespace census
