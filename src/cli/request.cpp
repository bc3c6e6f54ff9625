#include "cli/request.h"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "census/stack_census.h"
#include "cli/options.h"
#include "cli/shipped_models.h"
#include "cli/train_yaml.h"
#include "models/python_json.h"
#include "models/registry.h"
#include "util/checked.h"
#include "util/escape.h"

namespace census::cli {

Result<ModelConfig> resolve_model(const std::string& source) {
  for (const ShippedModel& model : shipped_models()) {
    if (model.name == source) {
      nlohmann::json json = parse_python_json(model.json);
      return read_config(json);
    }
  }
  return read_config_file(source);
}

namespace {

// The most experts the eager experts loop runs (experts_implementation eager): it runs a dozen ops and
// keeps an expert's gradient buffer for each expert hit, in every MoE layer, so the experts bound its
// time and memory. 2^10, twice the most a checkpoint has (Qwen3-Next's 512); grouped_mm has no loop.
constexpr int64_t kLargestEagerExperts = int64_t{1} << 10;

Status check_eager_experts(const ModelConfig& c) {
  if (c.moe.experts_implementation == nn::ExpertsImplementation::kEager && c.moe.num_experts > kLargestEagerExperts)
    return refuse("num_experts", std::to_string(c.moe.num_experts) + " experts are more than the eager loop runs (at most " +
                                     std::to_string(kLargestEagerExperts) + "); use grouped_mm experts");
  return {};
}

// Refuse a config and sequence whose counts could pass 64 bits. Every width a layer's matmuls, buffers
// and parameters take is formed with Checked (util/checked.h), so a product of stated sizes cannot wrap
// unseen; the counts a census forms are bounded by these: the scores' FLOPs (every pair of tokens,
// each head), a matmul's FLOPs (tokens x width x width), a layer's bytes, the experts' parameters.
// Mamba-2's torch scan pads the tokens to whole chunks and takes, per chunk, every pair of its tokens:
// its largest products are (tokens padded) x chunk_size x heads x max(head_dim, state) (the diagonal
// blocks), (tokens padded) x width x state (the C terms) and (chunks + 1)^2 x width x state (the
// recurrence over chunk boundaries), each in fp32. A huge chunk_size (2^31 tokens a chunk) would wrap
// them as surely as a huge width.
Status check_mamba_scan(const nn::Mamba2Sizes& m, int64_t seq_length, int64_t limit) {
  const int64_t chunk = std::max<int64_t>(m.chunk_size, 1);
  const int64_t chunks = seq_length / chunk + (seq_length % chunk != 0);  // seq_length and chunk are at most 2^32
  const Checked padded = Checked{chunks} * chunk;
  const Checked state = Checked{4} * std::max(m.head_dim, m.ssm_state_size);
  const Checked diagonal = padded * chunk * m.num_heads * state;
  const Checked c_terms = Checked{4} * padded * m.intermediate_size * m.ssm_state_size;
  const Checked boundaries = Checked{4} * (Checked{chunks} + 1) * (Checked{chunks} + 1) * m.intermediate_size * m.ssm_state_size;
  if (diagonal.overflows(limit) || c_terms.overflows(limit) || boundaries.overflows(limit))
    return refuse("--seq-length", std::to_string(seq_length) + " tokens in Mamba-2 chunks of " + std::to_string(m.chunk_size) +
                                      " (the config's chunk_size) overflow 64-bit FLOP or byte counts; give fewer tokens, "
                                      "or fix the config's chunk size");
  return {};
}

Status check_sizes(const ModelConfig& c, int64_t seq_length) {
  const MlaConfig& mla = c.mla;
  const MoeConfig& moe = c.moe;
  const Checked heads = c.num_attention_heads;
  const Checked qk_head = max(Checked{c.head_dim}, Checked{mla.qk_nope_head_dim} + mla.qk_rope_head_dim);
  const Checked head = max(qk_head, Checked{mla.v_head_dim});
  const Checked linear_keys = Checked{c.linear_num_key_heads} * c.linear_key_head_dim;
  const Checked linear_values = Checked{c.linear_num_value_heads} * c.linear_value_head_dim;
  const std::pair<const char*, Checked> widths[] = {
      {"hidden_size", c.hidden_size},
      {"intermediate_size", c.intermediate_size},
      {"num_attention_heads x head_dim", heads * head},
      {"num_key_value_heads x head_dim", Checked{c.num_key_value_heads} * head},
      {"num_attention_heads x (qk_nope_head_dim + v_head_dim)",
       heads * (Checked{mla.qk_nope_head_dim} + mla.v_head_dim)},
      {"kv_lora_rank + qk_rope_head_dim", Checked{mla.kv_lora_rank} + mla.qk_rope_head_dim},
      {"q_lora_rank", mla.q_lora_rank},
      {"linear_num_key_heads x linear_key_head_dim", linear_keys},
      {"linear_num_value_heads x linear_value_head_dim", linear_values},
      {"the linear attention's convolution (2 x keys + values) x linear_conv_kernel_dim",
       (Checked{2} * linear_keys + linear_values) * std::max<int64_t>(c.linear_conv_kernel_dim, 1)},
      {"num_experts x num_experts_per_tok", Checked{moe.num_experts} * std::max<int64_t>(moe.num_experts_per_tok, 1)},
      {"moe_intermediate_size x num_experts_per_tok", Checked{moe.moe_intermediate_size} * std::max<int64_t>(moe.num_experts_per_tok, 1)},
      {"moe_intermediate_size x n_shared_experts", Checked{moe.moe_intermediate_size} * std::max<int64_t>(moe.n_shared_experts, 1)},
      {"shared_expert_intermediate_size", moe.shared_expert_intermediate_size},
      // Gemma 4: its full layers' heads, and the per-layer inputs the model computes for every layer.
      {"num_attention_heads x global_head_dim", heads * c.gemma4.global_head_dim},
      {"num_hidden_layers x hidden_size_per_layer_input",
       Checked{c.num_hidden_layers} * c.gemma4.hidden_size_per_layer_input},
  };
  // Each count below is at most a census's largest times a small constant (bytes per element, FLOPs
  // per multiply-add, the ops of a layer): a sixteenth of 64 bits leaves room for them.
  constexpr int64_t kLimit = INT64_MAX / 16;
  Checked width = 1;
  const char* widest = "hidden_size";
  for (const auto& [what, each] : widths) {
    if (each.overflows(kLimit / 1024))
      return refuse("config", std::string(what) + " overflows 64-bit FLOP or byte counts; fix the config");
    if (each.value() > width.value()) {
      width = each;
      widest = what;
    }
  }
  const Checked experts_parameters =
      Checked{3} * std::max<int64_t>(moe.num_experts, 1) * c.hidden_size * std::max(moe.moe_intermediate_size, c.intermediate_size);
  if ((Checked{4} * width * width).overflows(kLimit))
    return refuse("config", std::string("a layer's parameters overflow 64-bit byte counts (its widest width is ") + widest +
                                ", " + std::to_string(width.value()) + "); fix the config");
  if (experts_parameters.overflows(kLimit))
    return refuse("config", "the experts' parameters (num_experts x hidden_size x their width) overflow 64-bit byte "
                            "counts; fix the config");
  // A linear attention's state is no matmul's width: a chunk's products take it once per token (keys
  // by values, each head), so its counts grow as tokens x state.
  const Checked state = linear_values * c.linear_key_head_dim;
  if (state.overflows(kLimit / 1024))
    return refuse("config", "linear_num_value_heads x linear_key_head_dim x linear_value_head_dim (its state) "
                            "overflows 64-bit FLOP or byte counts; fix the config");
  const Checked s = seq_length;
  const Checked recurrence = Checked{64} * s * state;
  const Checked scores = Checked{4} * heads * s * s * head;
  const Checked matmul = Checked{2} * s * width * width;
  // The output layer's logits: tokens x vocabulary, in bytes and in the LM head's FLOPs.
  const Checked bytes = Checked{64} * s * max(width, Checked{c.vocab_size}) * 4;
  const Checked logits = Checked{2} * s * c.hidden_size * c.vocab_size;
  if (scores.overflows(kLimit) || matmul.overflows(kLimit) || bytes.overflows(kLimit) || logits.overflows(kLimit) ||
      recurrence.overflows(kLimit))
    return refuse("--seq-length", std::to_string(seq_length) +
                                      " tokens on this model overflow 64-bit FLOP or byte counts; give fewer tokens");
  if (c.mamba) return check_mamba_scan(*c.mamba, seq_length, kLimit);
  return {};
}

}  // namespace

Status check_request(const Request& r) {
  const ModelConfig& c = r.config;
  if (r.seq_length <= 0)
    return refuse("--seq-length", std::to_string(r.seq_length) + " is not a positive number of tokens; give one");
  if (r.micro_batch_size <= 0)
    return refuse("--micro-batch-size", std::to_string(r.micro_batch_size) +
                                            " is not a positive number of sequences; give one (1 by default)");
  if ((Checked{r.seq_length} * r.micro_batch_size).overflows(INT64_MAX / 16))
    return refuse("--micro-batch-size", std::to_string(r.micro_batch_size) + " sequences of " +
                                            std::to_string(r.seq_length) + " tokens overflow 64-bit counts; give fewer");
  if (r.layer_index < 0 || r.layer_index >= c.num_hidden_layers)
    return refuse("--layer-index", std::to_string(r.layer_index) + " is out of range: the model has " +
                                       std::to_string(c.num_hidden_layers) + " layers (0.." +
                                       std::to_string(c.num_hidden_layers - 1) + ")");
  // A layer that reads what an earlier layer wrote in the same forward has no census of its own.
  const bool single_layer = r.command == "layer" || r.command == "saved-ops" || r.command == "flops" ||
                            r.command == "traffic" || r.command == "explain" || r.command == "report";
  if (single_layer && c.family->stack_only != nullptr) {
    if (const char* why = c.family->stack_only(c, r.layer_index))
      return refuse("--layer-index", "layer " + std::to_string(r.layer_index) + " of this " + c.model_type +
                                         " model cannot be priced alone: " + why +
                                         "; use census stack, or census activations (which prices it through the stack)");
  }
  // The whole model's forward keeps every layer's router logits for the load-balancing loss then.
  if (r.command == "stack" && c.output_router_logits)
    return refuse("output_router_logits: true in the config",
                  "the load-balancing loss over every layer's router logits is not priced yet; set it to false to "
                  "price the stack without it");
  // The whole model runs: the stack census, and a kind that cannot run alone (in activations and the
  // report's kinds).
  if (r.command == "stack" || ((r.command == "activations" || r.command == "report") && c.family->stack_only != nullptr))
    CENSUS_TRY(check_stack_depth(c));
  if (r.tp <= 0) return refuse("--tp", std::to_string(r.tp) + " is not a positive degree; give one");
  if (c.num_key_value_heads % r.tp != 0 && r.tp % c.num_key_value_heads != 0)
    return refuse("--tp", std::to_string(r.tp) + " neither divides nor is a multiple of num_key_value_heads " +
                              std::to_string(c.num_key_value_heads) + "; choose a degree that is");
  // Every width and head count a rank holds a share of must split evenly (the key/value heads, and Gemma
  // 4's full layers' own, may be fewer than the ranks instead, each rank then holding one).
  for (const TpDividedField& field : tp_divided_fields()) {
    const int64_t size = field.get(c);
    const std::string_view name(field.name);
    if (size <= 0 || name == "num_key_value_heads" || name == "num_global_key_value_heads") continue;
    if (size % r.tp != 0)
      return refuse("--tp", std::to_string(r.tp) + " does not divide " + field.name + " " + std::to_string(size) +
                                "; choose a degree that does");
  }
  if (r.command == "output" && r.tp != 1)
    return refuse("--tp", "the output layer is split by its vocabulary, not by --tp; read its *_tp fields");
  CENSUS_TRY(check_eager_experts(c));
  // The micro-batch's tokens bound every count as one sequence of them would (its attention scores the
  // more tightly: those grow with each sequence's tokens squared). B is at most 2^16 and S 2^32: the
  // product fits.
  CENSUS_TRY(check_integer(kMicroBatchSizeRule, r.micro_batch_size));
  CENSUS_TRY(check_sizes(c, r.seq_length));
  if (r.micro_batch_size > 1 && !check_sizes(c, r.seq_length * r.micro_batch_size))
    return refuse("--micro-batch-size", std::to_string(r.micro_batch_size) + " sequences of " + std::to_string(r.seq_length) +
                                            " tokens overflow 64-bit FLOP or byte counts on this model; give fewer");
  return {};
}

Status apply_options(Request& r) {
  r.config.micro_batch_size = r.micro_batch_size;
  if (!r.kernels.empty()) {
    const std::optional<nn::KernelProfile> profile = nn::parse_kernel_profile(r.kernels);
    if (!profile) return refuse("--kernels", echoed(r.kernels) + " is not a kernel profile; use npu (the default) or cuda");
    r.config.kernels = *profile;
  }
  if (r.liger) {
    r.config.liger.rms_norm = r.config.liger.swiglu = r.config.liger.rope = true;
    CENSUS_TRY(check_liger_kernels(r.config));
    if (r.selective)
      return refuse("--liger with --selective", "the layer census's selective policy around Liger's functions is "
                                                "not checked yet (census step --recompute selective prices it); drop "
                                                "one of them");
    if (!r.train_yaml.empty())
      return refuse("--liger with --train-yaml", "Liger's Triton kernels and HyperParallel's fused NPU modules "
                                                 "replace the same modules; drop one of them");
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
    return refuse("--experts-implementation", echoed(r.experts_implementation) +
                                                  " is not known; use grouped_mm (Transformers' default) or eager");
  if (r.config.moe.num_experts == 0)
    return refuse("--experts-implementation", escaped(r.model_name) + " (" + r.config.model_type +
                                                  ") has no experts; drop the option for a dense model");
  r.config.moe.experts_implementation = r.experts_implementation == "eager" ? nn::ExpertsImplementation::kEager
                                                                           : nn::ExpertsImplementation::kGroupedMm;
  return check_eager_experts(r.config);
}

}  // namespace census::cli
