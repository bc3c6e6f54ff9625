#include "nn/float8_training.h"

namespace census::nn {
namespace {

thread_local std::optional<ops::Float8Recipe> g_recipe;
thread_local bool g_skip_head = false;

}  // namespace

std::string_view float8_recipe_name(ops::Float8Recipe recipe) {
  switch (recipe) {
    case ops::Float8Recipe::kTensorwise: return "tensorwise";
    case ops::Float8Recipe::kRowwise: return "rowwise";
    case ops::Float8Recipe::kRowwiseWithGwHp: return "rowwise-gw-hp";
  }
  return "?";
}

std::optional<ops::Float8Recipe> float8_recipe_named(std::string_view name) {
  for (ops::Float8Recipe r : {ops::Float8Recipe::kTensorwise, ops::Float8Recipe::kRowwise, ops::Float8Recipe::kRowwiseWithGwHp})
    if (float8_recipe_name(r) == name) return r;
  return std::nullopt;
}

std::optional<ops::Float8Recipe> float8_recipe() { return g_recipe; }

bool float8_skips_head() { return g_skip_head; }

bool float8_converts(const Tensor& weight) {
  return weight.dim() == 2 && weight.size(0) % 16 == 0 && weight.size(1) % 16 == 0;
}

Float8TrainingScope::Float8TrainingScope(std::optional<ops::Float8Recipe> recipe, bool skip_head)
    : previous_(g_recipe), previous_skip_head_(g_skip_head) {
  g_recipe = recipe;
  g_skip_head = skip_head;
}

Float8TrainingScope::~Float8TrainingScope() {
  g_recipe = previous_;
  g_skip_head = previous_skip_head_;
}

}  // namespace census::nn
