// File: float8_training.h
// torchao's FP8 training over the model, as torchtitan converts it (its Float8LinearConverter at
// pytorch/torchtitan cca3be50f: convert_to_float8_training with its module_filter_fn, filter_fqns empty):
// every nn.Linear whose weight's dimensions are both multiples of 16 becomes a Float8Linear of the recipe
// (ops::float8_linear); the others stay bf16, as do the layers that are no nn.Linear (a MoE block's
// experts and router). Eager: torch.compile fuses the casts' fp32 temporaries away, which Census does not
// model. Set for a step by its scope; Linear reads it (nn/linear.h).
#pragma once

#include <optional>
#include <string_view>

#include "ops/ops.h"

namespace census::nn {

// The recipes by the names census step takes (--fp8): tensorwise, rowwise, rowwise-gw-hp (torchao's
// rowwise_with_gw_hp).
std::string_view float8_recipe_name(ops::Float8Recipe recipe);
std::optional<ops::Float8Recipe> float8_recipe_named(std::string_view name);

// The recipe the step's Linears run under, or none; and whether the LM head stays bf16 (torchtitan's
// filter_fqns=["output"], Transformers' lm_head), read where the head runs (models/causal_lm.cpp).
std::optional<ops::Float8Recipe> float8_recipe();
bool float8_skips_head();

// Whether torchtitan's filter converts a Linear of this weight: both its dimensions multiples of 16.
bool float8_converts(const Tensor& weight);

class Float8TrainingScope {
 public:
  explicit Float8TrainingScope(std::optional<ops::Float8Recipe> recipe, bool skip_head = false);
  ~Float8TrainingScope();
  Float8TrainingScope(const Float8TrainingScope&) = delete;
  Float8TrainingScope& operator=(const Float8TrainingScope&) = delete;

 private:
  std::optional<ops::Float8Recipe> previous_;
  bool previous_skip_head_;
};

}  // namespace census::nn
