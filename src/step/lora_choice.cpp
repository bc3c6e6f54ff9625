#include "step/lora_choice.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "models/registry.h"
#include "util/escape.h"

namespace census {

Status check_lora(const ModelConfig& config, const StepOptions& o) {
  if (!o.lora) return {};
  const nn::LoraConfig& lora = *o.lora;
  if (lora.r < 1 || lora.r > kLargestLoraRank)
    return refuse("--lora-rank " + std::to_string(lora.r), "give a rank from 1 to 2^20");
  if (!std::isfinite(lora.alpha) || lora.alpha <= 0 || lora.alpha > 1e12)
    return refuse("--lora-alpha", "give a positive number (PEFT's lora_alpha; scaling is lora_alpha / r)");
  if (!std::isfinite(lora.dropout) || lora.dropout < 0 || lora.dropout >= 1)
    return refuse("--lora-dropout", "give a probability p with 0 <= p < 1");
  if (!config.family->peft_lora) {
    std::string checked;
    for (const Family* family : families())
      if (family->peft_lora) checked += (checked.empty() ? "" : ", ") + std::string(family->model_type);
    return refuse("--lora on " + config.model_type, "PEFT's LoRA is checked against the oracle on " + checked +
                                                        "; it is not priced on this model type yet");
  }
  if (!lora.all_linear && lora.target_modules.empty() && config.family->lora_default_targets == nullptr)
    return refuse("--lora-targets", "PEFT has no default target modules for " + config.model_type +
                                        "; name them (q_proj,v_proj, ...), or give all-linear");
  for (const std::string& name : lora.target_modules) {
    if (name.empty() || name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") !=
                            std::string::npos)
      return refuse("--lora-targets " + echoed(name), "is not a module name; give names of Linears (q_proj, up_proj, "
                                                      "...), comma-separated, or all-linear");
    // The head adapted: a lora.Linear run by Transformers' forward, before its loss on the logits. TRL's and
    // Liger's losses read the head's weight themselves, past the adapter; a tied head is the embedding's.
    if (name == "lm_head" && config.tie_word_embeddings)
      return refuse("--lora-targets lm_head on " + config.model_type,
                    "the head is tied to the embedding here, which adapting it is not priced for; give the layers' "
                    "Linears or all-linear");
    if (name == "lm_head" && o.loss != nn::CausalLMLoss::kForCausalLM)
      return refuse("--lora-targets lm_head with --loss " + std::string(nn::causal_lm_loss_name(o.loss)),
                    "that loss reads the head's weight itself, past its adapter; give --loss hf, or leave lm_head "
                    "out");
  }
  // modules_to_save: the embedding and the untied head, as the oracle checks them (PEFT takes any module's name).
  for (const std::string& name : lora.modules_to_save) {
    if (name != "lm_head" && name != "embed_tokens")
      return refuse("--modules-to-save " + echoed(name),
                    "PEFT's modules_to_save is priced on lm_head and embed_tokens; give those, comma-separated");
    if (config.tie_word_embeddings)
      return refuse("--modules-to-save on " + config.model_type,
                    "the head is tied to the embedding here, which PEFT saves as one copy (ensure_weight_tying) "
                    "and which is not priced yet; drop --modules-to-save");
    // all-linear adapts neither: the head is left out of it, and the embedding is no Linear.
    if (std::find(lora.target_modules.begin(), lora.target_modules.end(), name) != lora.target_modules.end())
      return refuse("--modules-to-save " + name, "is also a LoRA target; name it in one of them");
    // Checked beside Transformers' loss and TRL's chunked one (which reads the head's weight through the
    // wrapper: the copy's), TRL's offloading, DoRA, a 4-bit base with and without PEFT's kbit helper, and the
    // Trainer's autocast.
  }
  // A layer with experts (mlp_only_layers may list every one: then the model has none).
  bool experts = false;
  for (int64_t i = 0; i < config.num_hidden_layers && !experts; ++i) experts = is_moe_layer(config, i);
  if (experts) {
    if (lora.all_linear)
      return refuse("--lora-targets all-linear on " + config.model_type,
                    "on a mixture-of-experts model PEFT's all-linear also adapts the router and, through "
                    "target_parameters, the fused experts, which is not priced yet; name the attention's "
                    "projections (q_proj,k_proj,v_proj,o_proj)");
    for (const std::string& name : lora.target_modules)
      if (name != "q_proj" && name != "k_proj" && name != "v_proj" && name != "o_proj")
        return refuse("--lora-targets " + name + " on " + config.model_type,
                      "on a mixture-of-experts model LoRA is priced on the attention's projections alone "
                      "(q_proj,k_proj,v_proj,o_proj) yet");
  }
  const char* with = layout_flag(o);
  if (with != nullptr)
    return refuse(std::string("--lora with ") + with,
                  "adapters on a parallel layout are not priced yet; price one rank's whole model (no --tp, --pp, "
                  "--cp, --ep, --dp, --zero or --fsdp)");
  with = o.fp8                                                  ? "--fp8"
         : config.liger.any() || o.loss == nn::CausalLMLoss::kLigerFlce ? "--liger"
         : o.optimizer_in_backward                               ? "--optimizer-in-backward"
         : o.composition.fp32_master_weights                     ? "--master-weights fp32"
         : o.composition.fp32_gradients                          ? "--grad-dtype fp32"
                                                                 : nullptr;
  if (with != nullptr)
    return refuse(std::string("--lora with ") + with, "is not priced beside adapters yet; drop one of them");
  // torchtune's recipes train torchtune's own LoRALinear, not PEFT's.
  if (o.loss == nn::CausalLMLoss::kTorchtuneChunked || o.loss == nn::CausalLMLoss::kTorchtuneLinear)
    return refuse("--lora with --loss " + std::string(nn::causal_lm_loss_name(o.loss)),
                  "PEFT's LoRA is priced with the losses its trainers run (Transformers' and TRL's chunked one); "
                  "torchtune's recipes train torchtune's own LoRA; give --loss hf or trl-chunked-nll");
  if (o.offload_activations == OffloadPolicy::kTorchtune)
    return refuse("--lora with --offload-activations torchtune",
                  "PEFT's LoRA is priced with TRL's offloading, which its SFTTrainer runs; torchtune's recipes train "
                  "torchtune's own LoRA; give --offload-activations trl");
  bool other_mode = o.recompute != Recompute::kNone && o.recompute != Recompute::kFull &&
                    o.recompute != Recompute::kFullReentrant;
  other_mode = other_mode || !o.recompute_by_kind.empty() || o.recompute_every_nth_layer > 0;
  if (other_mode)
    return refuse("--lora with --recompute", "adapters are priced with no checkpointing or with full checkpointing "
                                             "(the HF Trainer's gradient_checkpointing, or the reentrant one "
                                             "prepare_model_for_kbit_training sets) yet; give none, full or "
                                             "full-reentrant");
  // AdamW (each form), bitsandbytes' 8-bit AdamW and SGD are checked over the adapters; the paged AdamW8bit is
  // the same states held elsewhere.
  const bool checked = o.optimizer == StepOptimizer::kNone || o.optimizer == StepOptimizer::kAdamW ||
                       o.optimizer == StepOptimizer::kAdamW8bit || o.optimizer == StepOptimizer::kPagedAdamW8bit ||
                       o.optimizer == StepOptimizer::kSGD;
  if (!checked)
    return refuse("--lora with --optimizer " + std::string(optimizer_name(o.optimizer)),
                  "adapters are priced with adamw, adamw8bit, paged-adamw8bit and sgd yet; give one of them");
  return {};
}

nn::LoraConfig resolved_lora(const ModelConfig& config, nn::LoraConfig lora) {
  if (!lora.all_linear && lora.target_modules.empty() && config.family->lora_default_targets != nullptr)
    lora.target_modules = nn::lora_target_list(config.family->lora_default_targets);
  if (config.family->peft_expert_names != nullptr) lora.expert_names = nn::lora_target_list(config.family->peft_expert_names);
  return lora;
}

}  // namespace census
