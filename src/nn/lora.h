// File: lora.h
// PEFT's LoRA over the model, as get_peft_model(model, LoraConfig(...)) adapts it (huggingface/peft 5d602fd,
// tuners/lora/layer.py and tuners_utils.py):
//   - every nn.Linear the targets name becomes a lora.Linear: its base layer frozen, beside it lora_A (r, in)
//     and lora_B (out, r), bias-free, in the adapters' dtype: fp32 where get_peft_model's
//     autocast_adapter_dtype=True (its default) upcasts them, else the base's bf16;
//   - every other parameter is frozen (requires_grad=False): no gradient and no optimizer state;
//   - Linear.forward: result = base_layer(x); x = x.to(lora_A's dtype) (a copy where the dtypes differ);
//     result = result + lora_B(lora_A(dropout(x))) * scaling (type promotion: fp32 where the adapters are);
//     result = result.to(the base result's dtype). Dropout is nn.Identity at p = 0, else nn.Dropout, which
//     CUDA runs as native_dropout (a new output and a bool mask, kept for the backward).
//   - scaling = lora_alpha / r (rsLoRA's lora_alpha / sqrt(r) changes the number alone, no byte).
//   - DoRA (use_dora, DoraLinearVariant and DoraLinearLayer.forward): a trained magnitude vector (out) beside
//     the pair; each forward makes the adapters' weight B(A(eye(in))).T, an fp32 copy of the base weight, their
//     scaled sum and its row norms (detached), then (m / norm - 1) * (base - bias) + (m / norm) * B(A(x)) *
//     scaling, added to the base's output. With dropout the base is run again on the dropped input (F.linear).
// Targets as PEFT matches a list: a Linear whose module path is a name or ends in "." + a name;
// "all-linear": every nn.Linear but the output embedding (lm_head). Under checkpointing, Transformers'
// gradient_checkpointing_enable makes the input embeddings' output a leaf that requires grad
// (enable_input_require_grads), so the first layer saves what every layer saves.
// Set for a step by its scope; Linear reads it (nn/linear.h), the causal LM its embedding rule.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "nn/linear4bit.h"
#include "nn/module.h"

namespace census::nn {

struct LoraConfig {
  int64_t r = 8;             // LoraConfig's defaults: r 8, lora_alpha 8, lora_dropout 0
  double alpha = 8;
  double dropout = 0.0;
  bool all_linear = false;   // target_modules="all-linear"
  std::vector<std::string> target_modules;  // else these module names (the model type's default if none given)
  DType dtype = DType::kFloat32;  // the adapters': fp32 (autocast_adapter_dtype=True) or bf16 (False)
  bool use_dora = false;     // DoRA: a magnitude vector beside each adapter pair (lora/dora.py)
  // Names PEFT moves to target_parameters on this model type (Family::peft_expert_names): never a Linear's.
  std::vector<std::string> expert_names;
  // LoraConfig's modules_to_save: each module so named (lm_head, embed_tokens) kept as PEFT's
  // ModulesToSaveWrapper keeps it, the original frozen beside a trained copy of it, which its forward runs.
  std::vector<std::string> modules_to_save;
  double scaling() const { return alpha / static_cast<double>(r); }
  // Whether modules_to_save names `name` (lm_head, embed_tokens): that module's copy trains.
  bool saves(std::string_view name) const {
    return std::find(modules_to_save.begin(), modules_to_save.end(), name) != modules_to_save.end();
  }
};

// A comma-separated list of module names ("q_proj,v_proj"), each kept as written; empty names dropped.
std::vector<std::string> lora_target_list(std::string_view names);

// The adapters the step's Linears get, or none; whether a Linear at `path` is one the targets name.
const LoraConfig* lora_config();
bool lora_adapts(std::string_view path);
// Whether the module at `path` is one of modules_to_save (a Linear's or an Embedding's path).
bool lora_saves(std::string_view path);
// The module at `path` as ModulesToSaveWrapper keeps it, where lora_saves(path): its original `weight`,
// registered by the caller (frozen), then a copy of it registered beside (modules_to_save.default.weight, its
// shape and dtype), trained. Returns the copy, which the module's forward runs.
Tensor make_module_to_save(const std::string& path, const Tensor& weight, ParameterList& params);
// Whether the input embeddings' output is made a leaf requiring grad (enable_input_require_grads).
bool lora_inputs_require_grad();

class LoraScope {
 public:
  LoraScope(const LoraConfig* config, bool inputs_require_grad);
  ~LoraScope();
  LoraScope(const LoraScope&) = delete;
  LoraScope& operator=(const LoraScope&) = delete;
  // The first of the config's target module names no Linear built under the scope matched, or empty.
  std::string unmatched_target() const;
  // The Linears adapted under the scope so far.
  int64_t adapted_linears() const;

 private:
  const LoraConfig* previous_;
  bool previous_inputs_;
  std::vector<bool> previous_matched_;
  int64_t previous_adapted_;
};

// One lora.Linear's adapter pair, registered after its base layer's weight and bias (as named_parameters
// lists lora_A.default.weight and lora_B.default.weight), trainable.
struct LoraAdapter {
  Tensor lora_A;     // (r, in)
  Tensor lora_B;     // (out, r)
  Tensor magnitude;  // DoRA's lora_magnitude_vector (out), or undefined
};
LoraAdapter make_lora_adapter(const std::string& path, int64_t in_features, int64_t out_features,
                              ParameterList& params);
// The adapted Linear's forward after its base layer's: `result` is base_layer(input), of the frozen
// `weight` (DoRA reads it).
Tensor lora_forward(const Tensor& input, Tensor result, const LoraAdapter& adapter, const Tensor& weight,
                    const Tensor& bias);
// lora.Linear4bit's (lora/bnb.py), over a bitsandbytes 4-bit base: the base's result cloned ("defensively",
// its comment says), the adapters' output cast to the result's dtype before the sum (outside autocast); DoRA's
// sum in the promoted dtype, cast after, its base weight dequantized in each forward.
Tensor lora_forward_4bit(const Tensor& input, Tensor result, const LoraAdapter& adapter,
                         const Linear4bitWeight& weight, const Tensor& bias);

}  // namespace census::nn
