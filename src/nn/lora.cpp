#include "nn/lora.h"

#include <functional>
#include <utility>

#include "ops/ops.h"

namespace census::nn {
namespace {

thread_local const LoraConfig* g_config = nullptr;
thread_local bool g_inputs_require_grad = false;
thread_local std::vector<bool> g_matched;  // by target module name: whether a Linear matched it
thread_local int64_t g_adapted = 0;        // the Linears adapted under the scope

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
  for (const std::string& name : g_config->expert_names)
    if (ends_with_module(path, name)) return false;
  if (g_config->all_linear) return path != "lm_head";
  bool adapts = false;
  for (size_t i = 0; i < g_config->target_modules.size(); ++i)
    if (ends_with_module(path, g_config->target_modules[i])) adapts = g_matched[i] = true;
  return adapts;
}

bool lora_saves(std::string_view path) {
  if (g_config == nullptr) return false;
  for (const std::string& name : g_config->modules_to_save)
    if (ends_with_module(path, name)) return true;
  return false;
}

Tensor make_module_to_save(const std::string& path, const Tensor& weight, ParameterList& params) {
  // ModulesToSaveWrapper.update: copy.deepcopy(original_module), original_module.requires_grad_(False), the
  // copy's parameters requires_grad_(True); made after prepare_model_for_kbit_training, in the original's dtype.
  const ParametersKeepDtype keep;
  Tensor copy = register_parameter(params, path, "modules_to_save.default.weight", weight.sizes(), weight.dtype());
  copy.impl()->requires_grad = true;
  return copy;
}

bool lora_inputs_require_grad() { return g_config != nullptr && g_inputs_require_grad; }

LoraScope::LoraScope(const LoraConfig* config, bool inputs_require_grad)
    : previous_(g_config), previous_inputs_(g_inputs_require_grad), previous_matched_(std::move(g_matched)),
      previous_adapted_(g_adapted) {
  g_config = config;
  g_adapted = 0;
  g_inputs_require_grad = inputs_require_grad;
  g_matched.assign(config != nullptr ? config->target_modules.size() : 0, false);
}

LoraScope::~LoraScope() {
  g_config = previous_;
  g_inputs_require_grad = previous_inputs_;
  g_matched = std::move(previous_matched_);
  g_adapted = previous_adapted_;
}

int64_t LoraScope::adapted_linears() const { return g_adapted; }

std::string LoraScope::unmatched_target() const {
  for (size_t i = 0; i < g_matched.size(); ++i)
    if (!g_matched[i]) return g_config->target_modules[i];
  return {};
}


LoraAdapter make_lora_adapter(const std::string& path, int64_t in_features, int64_t out_features,
                              ParameterList& params) {
  const LoraConfig& config = *g_config;
  ++g_adapted;
  LoraAdapter adapter;
  adapter.lora_A = register_parameter(params, path, "lora_A.default.weight", Dims{config.r, in_features}, config.dtype);
  adapter.lora_B = register_parameter(params, path, "lora_B.default.weight", Dims{out_features, config.r}, config.dtype);
  if (config.use_dora)
    adapter.magnitude = register_parameter(params, path, "lora_magnitude_vector.default.weight", Dims{out_features},
                                           config.dtype);
  // _mark_only_adapters_as_trainable: the adapters alone train.
  for (Tensor* p : {&adapter.lora_A, &adapter.lora_B, &adapter.magnitude})
    if (p->defined()) p->impl()->requires_grad = true;
  return adapter;
}

namespace {

// DoraLinearLayer.forward (lora/dora.py) on `x` (cast to the adapters' dtype, dropped where dropout runs),
// `base_result` the base's output, or undefined where dropout ran (the base is run again on x). `base_weight`
// gives the base layer's weight as dequantize_module_weight does, once the adapters' is made: the parameter,
// or a 4-bit one dequantized.
Tensor dora_forward(const Tensor& x, Tensor base_result, const LoraAdapter& adapter,
                    const std::function<Tensor()>& base_weight, const Tensor& bias, double scaling) {
  // get_lora_weight: lora_B(lora_A(eye)).T, the product through the modules (not B @ A, for FSDP's sake).
  const Tensor x_eye = ops::eye(adapter.lora_A.size(1), adapter.lora_A.dtype());
  const Tensor lora_weight = ops::t(ops::linear(ops::linear(x_eye, adapter.lora_A, Tensor()), adapter.lora_B, Tensor()));
  Tensor weight = base_weight();
  const int64_t out_features = weight.size(0);
  weight = ops::to(weight, x.dtype());  // weight.to(x.dtype): an fp32 copy under fp32 adapters
  Tensor weight_norm;
  {
    // get_weight_norm(weight, lora_weight.detach(), scaling): no gradient reaches it (detached after, too).
    const Tensor summed = ops::add(weight, ops::mul_number(lora_weight.detach(), scaling));
    weight_norm = ops::linalg_vector_norm(summed, 1, /*keepdim=*/false).detach();
  }
  const Tensor mag_norm_scale = ops::view(ops::div(adapter.magnitude, weight_norm), Dims{1, out_features});
  const Tensor lora_result = ops::linear(ops::linear(x, adapter.lora_A, Tensor()), adapter.lora_B, Tensor());
  if (!base_result.defined())
    base_result = ops::linear(x, weight, Tensor());
  else if (bias.defined())
    base_result = ops::sub(base_result, bias);  // base_result - bias: the bias is no part of the scaled base
  // (mag_norm_scale - 1) * base_result + mag_norm_scale * lora_result * scaling, left to right.
  const Tensor scaled_base = ops::mul(ops::sub(mag_norm_scale, 1.0), base_result);
  const Tensor scaled_lora = ops::mul_number(ops::mul(mag_norm_scale, lora_result), scaling);
  return ops::add(scaled_base, scaled_lora);
}

}  // namespace

Tensor lora_forward(const Tensor& input, Tensor result, const LoraAdapter& adapter, const Tensor& weight,
                    const Tensor& bias) {
  const LoraConfig& config = *g_config;
  const DType result_dtype = result.dtype();  // torch_result_dtype
  // _cast_input_dtype: each adapted Linear makes its own copy where the dtypes differ.
  const Tensor x = ops::to(input, adapter.lora_A.dtype());
  if (adapter.magnitude.defined()) {  // DoraLinearVariant.forward: with dropout, the base runs again on it
    const bool dropped = config.dropout > 0;
    const Tensor dora_x = dropped ? ops::native_dropout(x, config.dropout) : x;
    result = ops::add(result, dora_forward(dora_x, dropped ? Tensor() : result, adapter, [&] { return weight; },
                                           bias, config.scaling()));
    return ops::to(result, result_dtype);
  }
  {
    // result = result + lora_B(lora_A(dropout(x))) * scaling: each temporary goes once used (what the
    // products save stays), the base's output once the sum is made; the sum in the promoted dtype.
    const Tensor dropped = config.dropout > 0 ? ops::native_dropout(x, config.dropout) : x;
    const Tensor a = ops::linear(dropped, adapter.lora_A, Tensor());
    Tensor scaled = ops::mul_number(ops::linear(a, adapter.lora_B, Tensor()), config.scaling());
    result = ops::add(result, scaled);
  }
  return ops::to(result, result_dtype);  // result.to(torch_result_dtype)
}

Tensor lora_forward_4bit(const Tensor& input, Tensor base_result, const LoraAdapter& adapter,
                         const Linear4bitWeight& weight, const Tensor& bias) {
  const LoraConfig& config = *g_config;
  Tensor result = ops::clone(base_result);  // result = result.clone(): the base's goes
  base_result = Tensor();
  const DType expected_dtype = result.dtype();
  const Tensor x = ops::to(input, adapter.lora_A.dtype());
  if (adapter.magnitude.defined()) {
    // DoraLinearVariant.forward, its base weight dequantize_module_weight's: dequantize_4bit of the packed one.
    const bool dropped = config.dropout > 0;
    const Tensor dora_x = dropped ? ops::native_dropout(x, config.dropout) : x;
    const auto dequantized = [&] { return ops::bnb_dequantize_4bit(weight.packed, weight.state); };
    result = ops::add(result, dora_forward(dora_x, dropped ? Tensor() : result, adapter, dequantized, bias,
                                           config.scaling()));
    return ops::to(result, expected_dtype);
  }
  Tensor output;
  {
    // lora_B(lora_A(dropout(x))) * scaling: each temporary goes once used (what the products save stays).
    const Tensor dropped = config.dropout > 0 ? ops::native_dropout(x, config.dropout) : x;
    const Tensor a = ops::linear(dropped, adapter.lora_A, Tensor());
    output = ops::mul_number(ops::linear(a, adapter.lora_B, Tensor()), config.scaling());
  }
  output = ops::to(output, expected_dtype);
  return ops::add(result, output);
}

}  // namespace census::nn
