#include "cli/request.h"

#include <nlohmann/json.hpp>

#include "cli/shipped_models.h"
#include "cli/train_yaml.h"
#include "models/registry.h"

namespace census::cli {

Result<ModelConfig> resolve_model(const std::string& source) {
  for (const ShippedModel& model : shipped_models()) {
    if (model.name == source) {
      nlohmann::json json = nlohmann::json::parse(model.json, nullptr, /*allow_exceptions=*/false);
      return read_config(json);
    }
  }
  return read_config_file(source);
}

Status check_request(const Request& r) {
  const ModelConfig& c = r.config;
  if (r.seq_length <= 0)
    return refuse("--seq-length", std::to_string(r.seq_length) + " is not a positive number of tokens; give one");
  if (r.layer_index < 0 || r.layer_index >= c.num_hidden_layers)
    return refuse("--layer-index", std::to_string(r.layer_index) + " is out of range: the model has " +
                                       std::to_string(c.num_hidden_layers) + " layers (0.." +
                                       std::to_string(c.num_hidden_layers - 1) + ")");
  if (r.tp <= 0) return refuse("--tp", std::to_string(r.tp) + " is not a positive degree; give one");
  if (c.num_key_value_heads % r.tp != 0 && r.tp % c.num_key_value_heads != 0)
    return refuse("--tp", std::to_string(r.tp) + " neither divides nor is a multiple of num_key_value_heads " +
                              std::to_string(c.num_key_value_heads) + "; choose a degree that is");
  // Every width and head count a rank holds a share of must split evenly (the key/value heads may be
  // fewer than the ranks instead, each rank then holding one).
  for (const TpDividedField& field : tp_divided_fields()) {
    const int64_t size = field.get(c);
    if (size <= 0 || std::string_view(field.name) == "num_key_value_heads") continue;
    if (size % r.tp != 0)
      return refuse("--tp", std::to_string(r.tp) + " does not divide " + field.name + " " + std::to_string(size) +
                                "; choose a degree that does");
  }
  if (r.command == "output" && r.tp != 1)
    return refuse("--tp", "the output layer is split by its vocabulary, not by --tp; read its *_tp fields");
  // The largest counts a census forms: the scores' FLOPs (every pair of tokens) and a layer's bytes.
  __extension__ using Wide = __int128;  // exact products of sizes that may not fit 64 bits
  const Wide s = r.seq_length;
  const Wide width = std::max({c.hidden_size, c.intermediate_size, c.num_attention_heads * c.head_dim,
                               c.moe.moe_intermediate_size * c.moe.num_experts_per_tok,
                               c.moe.num_experts * c.moe.num_experts_per_tok});
  const Wide scores = Wide{4} * c.num_attention_heads * s * s * c.head_dim;
  const Wide matmul = Wide{2} * s * width * width;
  const Wide bytes = Wide{64} * s * std::max<Wide>(width, c.vocab_size) * 4;
  const Wide limit = static_cast<Wide>(INT64_MAX) / 16;
  if (scores > limit || matmul > limit || bytes > limit)
    return refuse("--seq-length", std::to_string(r.seq_length) +
                                      " tokens on this model overflow 64-bit FLOP or byte counts; give fewer tokens");
  return {};
}

Status apply_options(Request& r) {
  if (!r.kernels.empty()) {
    const std::optional<nn::KernelProfile> profile = nn::parse_kernel_profile(r.kernels);
    if (!profile) return refuse("--kernels", "'" + r.kernels + "' is not a kernel profile; use npu (the default) or cuda");
    r.config.kernels = *profile;
  }
  if (!r.train_yaml.empty()) {
    if (!nn::kernel_profile(r.config.kernels).fused_npu_modules)
      return refuse("--train-yaml", "its fused modules call torch_npu's kernels, which the " +
                                        std::string(nn::kernel_profile(r.config.kernels).name) +
                                        " profile does not run; use --kernels npu");
    auto specs = read_train_yaml(r.train_yaml);
    CENSUS_TRY(specs);
    if (!specs->empty() && r.config.family->class_prefix == nullptr)
      return refuse("--train-yaml", r.config.model_type +
                                        "'s layers take no module replacements yet (the census installs them in "
                                        "the Llama-like layers: llama, mistral, qwen2, qwen3, qwen2_moe, qwen3_moe, "
                                        "mixtral); drop the option");
    r.config.replacements = specs.take();
  }
  if (r.experts_implementation.empty()) return {};
  if (r.experts_implementation != "grouped_mm" && r.experts_implementation != "eager")
    return refuse("--experts-implementation", "'" + r.experts_implementation +
                                                  "' is not known; use grouped_mm (Transformers' default) or eager");
  if (r.config.moe.num_experts == 0)
    return refuse("--experts-implementation", r.model_name + " (" + r.config.model_type +
                                                  ") has no experts; drop the option for a dense model");
  r.config.moe.experts_implementation = r.experts_implementation == "eager" ? nn::ExpertsImplementation::kEager
                                                                           : nn::ExpertsImplementation::kGroupedMm;
  return {};
}

}  // namespace census::cli
