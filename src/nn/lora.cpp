#include "nn/lora.h"

#include <utility>

#include "ops/ops.h"

namespace census::nn {
namespace {

thread_local const LoraConfig* g_config = nullptr;
thread_local bool g_inputs_require_grad = false;
thread_local std::vector<bool> g_matched;  // by target module name: whether a Linear matched it

bool ends_with_module(std::string_view path, std::string_view name) {
  if (path == name) return true;
  return path.size() > name.size() && path.substr(path.size() - name.size()) == name &&
         path[path.size() - name.size() - 1] == '.';
}

}  // namespace

std::vector<std::string> lora_target_list(std::string_view names) {
  std::vector<std::string> out;
  while (!names.empty()) {
    const size_t comma = names.find(',');
    const std::string_view name = names.substr(0, comma);
    if (!name.empty()) out.emplace_back(name);
    if (comma == std::string_view::npos) break;
    names.remove_prefix(comma + 1);
  }
  return out;
}

const LoraConfig* lora_config() { return g_config; }

bool lora_adapts(std::string_view path) {
  if (g_config == nullptr) return false;
  if (g_config->all_linear) return path != "lm_head";
  bool adapts = false;
  for (size_t i = 0; i < g_config->target_modules.size(); ++i)
    if (ends_with_module(path, g_config->target_modules[i])) adapts = g_matched[i] = true;
  return adapts;
}

bool lora_inputs_require_grad() { return g_config != nullptr && g_inputs_require_grad; }

LoraScope::LoraScope(const LoraConfig* config, bool inputs_require_grad)
    : previous_(g_config), previous_inputs_(g_inputs_require_grad), previous_matched_(std::move(g_matched)) {
  g_config = config;
  g_inputs_require_grad = inputs_require_grad;
  g_matched.assign(config != nullptr ? config->target_modules.size() : 0, false);
}

LoraScope::~LoraScope() {
  g_config = previous_;
  g_inputs_require_grad = previous_inputs_;
  g_matched = std::move(previous_matched_);
}

std::string LoraScope::unmatched_target() const {
  for (size_t i = 0; i < g_matched.size(); ++i)
    if (!g_matched[i]) return g_config->target_modules[i];
  return {};
}

LoraAdapter make_lora_adapter(const std::string& path, int64_t in_features, int64_t out_features,
                              ParameterList& params) {
  const LoraConfig& config = *g_config;
  LoraAdapter adapter;
  adapter.lora_A = register_parameter(params, path, "lora_A.default.weight", Dims{config.r, in_features}, config.dtype);
  adapter.lora_B = register_parameter(params, path, "lora_B.default.weight", Dims{out_features, config.r}, config.dtype);
  // _mark_only_adapters_as_trainable: the adapters alone train.
  adapter.lora_A.impl()->requires_grad = true;
  adapter.lora_B.impl()->requires_grad = true;
  return adapter;
}

Tensor lora_forward(const Tensor& input, const Tensor& result, const LoraAdapter& adapter) {
  const LoraConfig& config = *g_config;
  const DType result_dtype = result.dtype();  // torch_result_dtype
  // _cast_input_dtype: each adapted Linear makes its own copy where the dtypes differ.
  const Tensor x = ops::to(input, adapter.lora_A.dtype());
  const Tensor dropped = config.dropout > 0 ? ops::native_dropout(x, config.dropout) : x;
  const Tensor a = ops::linear(dropped, adapter.lora_A, Tensor());
  const Tensor b = ops::linear(a, adapter.lora_B, Tensor());
  // result + lora_B(...) * scaling: a Python float, then the sum in the promoted dtype.
  const Tensor sum = ops::add(result, ops::mul_number(b, config.scaling()));
  return ops::to(sum, result_dtype);
}

}  // namespace census::nn
