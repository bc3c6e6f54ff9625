#include "util/escape.h"
#include "models/llama.h"

#include "nn/attention_kernel.h"
#include "nn/pre_norm_layer.h"
#include "ops/ops.h"

namespace census {

LlamaAttention::LlamaAttention(const ModelConfig& c, nn::ParameterList& params, bool use_rope)
    : kernels_(c.kernels),
      liger_rope_(c.liger.rope),
      head_dim_(c.head_dim),
      residual_dropout_(c.residual_dropout),
      use_rope_(use_rope),
      q_proj("self_attn.q_proj", c.hidden_size, c.num_attention_heads * c.head_dim, c.qkv_bias, params),
      k_proj("self_attn.k_proj", c.hidden_size, c.num_key_value_heads * c.head_dim, c.qkv_bias, params),
      v_proj("self_attn.v_proj", c.hidden_size, c.num_key_value_heads * c.head_dim, c.qkv_bias, params),
      o_proj("self_attn.o_proj", c.num_attention_heads * c.head_dim, c.hidden_size, c.o_bias, params) {
  if (c.qk_norm) {
    q_norm.emplace("self_attn.q_norm", c.head_dim, c.rms_norm_eps, params);
    k_norm.emplace("self_attn.k_norm", c.head_dim, c.rms_norm_eps, params);
  }
}

Tensor LlamaAttention::forward(const Tensor& hidden_states, const nn::PositionEmbeddings& positions) const {
  ModuleScope scope(path_, ModuleKind::kOther);
  const int64_t batch = hidden_states.size(0), seq = hidden_states.size(1);
  // query_states = self.q_proj(hidden_states).view(hidden_shape) [-> q_norm] .transpose(1, 2)
  Tensor q = q_proj.forward(hidden_states);                                   // (1, S, Nh*D)
  q = ops::view(q, Dims{batch, seq, q.size(-1) / head_dim_, head_dim_});      // (1, S, Nh, D)
  if (q_norm) q = q_norm->forward(q);
  Tensor query_states = ops::transpose(q, 1, 2);                              // (1, Nh, S, D)
  Tensor k = k_proj.forward(hidden_states);
  k = ops::view(k, Dims{batch, seq, k.size(-1) / head_dim_, head_dim_});
  if (k_norm) k = k_norm->forward(k);
  Tensor key_states = ops::transpose(k, 1, 2);                                // (1, Nkv, S, D)
  Tensor v = v_proj.forward(hidden_states);
  Tensor value_states = ops::transpose(ops::view(v, Dims{batch, seq, v.size(-1) / head_dim_, head_dim_}), 1, 2);
  q = Tensor();
  k = Tensor();
  v = Tensor();

  if (use_rope_ && positions.cos.defined()) {  // a model without a rotary hands none (Granite's)
    // Liger's patch puts liger_rotary_pos_emb (LigerRopeFunction.apply) where the modeling file's is.
    auto [q_embed, k_embed] = liger_rope_ ? ops::liger_rope(query_states, key_states, positions.cos, positions.sin)
                                          : nn::apply_rotary_pos_emb(query_states, key_states, positions.cos, positions.sin);
    query_states = q_embed;
    key_states = k_embed;
  }

  Tensor attn_output = nn::flash_attention_forward(query_states, key_states, value_states, kernels_);  // (1, S, Nh, D)
  attn_output = ops::contiguous(ops::reshape(attn_output, Dims{batch, seq, attn_output.size(2) * attn_output.size(3)}));
  return ops::dropout(o_proj.forward(attn_output), residual_dropout_);
}

namespace {

std::optional<FusedModule> replacement(const ModelConfig& c, const std::string& module_name, const char* name) {
  if (c.replacements.empty() || c.family->class_prefix == nullptr) return std::nullopt;
  return replacement_for(c.replacements, module_name, std::string(c.family->class_prefix) + name);
}

}  // namespace

std::optional<FusedModule> layer_replacement(const ModelConfig& c, int64_t index, const char* path, const char* name) {
  if (c.replacements.empty()) return std::nullopt;
  return replacement(c, "model.layers." + std::to_string(index) + "." + path, name);
}

std::unique_ptr<nn::Norm> build_llama_norm(const ModelConfig& c, std::optional<FusedModule> fused,
                                           const std::string& path, int64_t dim, nn::ParameterList& params) {
  if (fused == FusedModule::kRmsNorm) return std::make_unique<nn::FusedRMSNorm>(path, dim, params);
  return std::make_unique<nn::LlamaRMSNorm>(path, dim, c.rms_norm_eps, params, c.liger.rms_norm ? c.liger.sm_count : 0);
}

std::unique_ptr<nn::FeedForward> build_dense_mlp(const ModelConfig& c, int64_t /*index*/, nn::ParameterList& params) {
  return std::make_unique<nn::GatedMLP>("mlp", c.hidden_size, c.intermediate_size, c.mlp_bias, params, c.hidden_act,
                                        "act_fn", c.liger.swiglu ? nn::LigerMul::kSiLU : nn::LigerMul::kNone);
}

LlamaDecoderLayer::LlamaDecoderLayer(const ModelConfig& c, int64_t index, FeedForwardBuilder build_mlp, bool use_rope)
    : hidden_size_(c.hidden_size), rotary_emb(c.head_dim) {
  // Registered as Transformers registers them: self_attn, mlp, the two norms.
  if (layer_replacement(c, index, "self_attn", "Attention") == FusedModule::kGqaFlashAttention)
    fused_attn.emplace(c.hidden_size, c.num_attention_heads, c.num_key_value_heads, c.head_dim, c.qkv_bias, c.o_bias,
                       c.qk_norm, c.rms_norm_eps, parameters_);
  else
    self_attn.emplace(c, parameters_, use_rope);
  mlp = build_mlp(c, index, parameters_);
  input_layernorm = build_llama_norm(c, layer_replacement(c, index, "input_layernorm", "RMSNorm"), "input_layernorm",
                                     c.hidden_size, parameters_);
  post_attention_layernorm = build_llama_norm(c, layer_replacement(c, index, "post_attention_layernorm", "RMSNorm"),
                                              "post_attention_layernorm", c.hidden_size, parameters_);
}

Tensor LlamaDecoderLayer::forward(const Tensor& input, const nn::PositionEmbeddings& positions) const {
  return nn::pre_norm_layer_forward(
      input, *input_layernorm,
      [&](const Tensor& normed) { return fused_attn ? fused_attn->forward(normed, positions) : self_attn->forward(normed, positions); },
      *post_attention_layernorm, *mlp);
}

Result<ModelConfig> read_llama_like(const ConfigReader& r, const Family& family, const LlamaLikeDefaults& d) {
  ModelConfig c;
  c.family = &family;
  c.model_type = family.model_type;
  auto vocab = r.size("vocab_size", d.vocab_size);
  CENSUS_TRY(vocab);
  auto hidden = r.size("hidden_size", d.hidden_size);
  CENSUS_TRY(hidden);
  auto intermediate = r.size("intermediate_size", d.intermediate_size);
  CENSUS_TRY(intermediate);
  auto layers = r.size("num_hidden_layers", d.num_hidden_layers);
  CENSUS_TRY(layers);
  auto heads = r.size("num_attention_heads", d.num_attention_heads);
  CENSUS_TRY(heads);
  auto kv_heads = r.size("num_key_value_heads", d.num_key_value_heads ? d.num_key_value_heads : *heads);
  CENSUS_TRY(kv_heads);
  std::optional<int64_t> head_dim_default = d.head_dim;
  if (!head_dim_default) {
    if (!r.has("head_dim") && *hidden % *heads != 0)
      return refuse("num_attention_heads", std::to_string(*heads) + " does not divide hidden_size " +
                                               std::to_string(*hidden) + "; state head_dim or fix the heads");
    head_dim_default = *hidden / *heads;
  }
  auto head_dim = r.size("head_dim", head_dim_default);
  CENSUS_TRY(head_dim);
  if (*heads % *kv_heads != 0)
    return refuse("num_key_value_heads", std::to_string(*kv_heads) + " does not divide num_attention_heads " +
                                             std::to_string(*heads) + "; fix the config");
  if (*head_dim % 2 != 0)
    return refuse("head_dim", std::to_string(*head_dim) + " is odd; rotary embeddings need an even head_dim");
  auto eps = r.positive_number("rms_norm_eps", 1e-6);
  CENSUS_TRY(eps);
  auto act = read_hidden_act(r, "hidden_act", "silu");
  CENSUS_TRY(act);
  c.vocab_size = *vocab;
  c.hidden_size = *hidden;
  c.intermediate_size = *intermediate;
  c.num_hidden_layers = *layers;
  c.num_attention_heads = *heads;
  c.num_key_value_heads = *kv_heads;
  c.head_dim = *head_dim;
  c.rms_norm_eps = *eps;
  c.hidden_act = *act;
  return c;
}

Result<nn::HiddenAct> read_hidden_act(const ConfigReader& r, const char* field, const std::string& fallback) {
  auto act = r.text(field, fallback);
  CENSUS_TRY(act);
  if (*act == "silu") return nn::HiddenAct::kSilu;
  if (*act == "gelu_pytorch_tanh") return nn::HiddenAct::kGeluTanh;
  return refuse(field, echoed(*act) + " is not priced yet (silu and gelu_pytorch_tanh are); use a model with one of them");
}

Status read_stated_layer_types(const ConfigReader& r, ModelConfig& c) {
  if (!r.has("layer_types")) return {};
  CENSUS_ASSIGN(c.layer_types, r.layer_kinds("layer_types", c.num_hidden_layers, {"full_attention", "sliding_attention"}));
  return {};
}

Status read_rotary_dim(const ConfigReader& r, ModelConfig& c, double default_factor) {
  // Stated in rope_parameters, that value is read (and refused where wrong); else the top level's.
  CENSUS_ASSIGN(const auto rope, r.section("rope_parameters"));
  const bool in_rope = rope && rope->has("partial_rotary_factor");
  CENSUS_ASSIGN(const double factor, in_rope ? rope->positive_number("partial_rotary_factor", default_factor)
                                             : r.positive_number("partial_rotary_factor", default_factor));
  // A share of head_dim: refused past 1 before the product is cast (1e300 would not fit 64 bits).
  if (factor > 1)
    return refuse(in_rope ? "rope_parameters.partial_rotary_factor" : "partial_rotary_factor",
                  "must be at most 1 (the share of head_dim rotated), not " + shown(factor) + "; fix the config");
  // dim = int(head_dim * factor); the rotary's inv_freq is arange(0, dim, 2), ceil(dim / 2) frequencies,
  // so cos and sin (and the channels rotated) are 2 * ceil(dim / 2) wide, an odd dim rounded up.
  const auto dim = static_cast<int64_t>(static_cast<double>(c.head_dim) * factor);
  c.rotary_dim = 2 * ((dim + 1) / 2);
  if (factor <= 0 || dim < 1)
    return refuse("partial_rotary_factor", "gives a rotary width of " + std::to_string(dim) + " of head_dim " +
                                               std::to_string(c.head_dim) + "; it must be positive, fix the config");
  return {};
}

Status read_attention_bias(const ConfigReader& r, ModelConfig& c) {
  CENSUS_ASSIGN(const bool attention_bias, r.flag("attention_bias", false));
  c.qkv_bias = c.o_bias = attention_bias;
  return {};
}

std::unique_ptr<nn::Norm> build_llama_final_norm(const ModelConfig& config, nn::ParameterList& params) {
  return build_llama_norm(config, replacement(config, "model.norm", "RMSNorm"), "norm", config.hidden_size, params);
}

namespace {

// LlamaConfig: attention_bias biases q, k, v and o; mlp_bias the MLP.
Result<ModelConfig> read_llama(const ConfigReader& r);

std::unique_ptr<DecoderLayer> build_llama_layer(const ModelConfig& config, int64_t index) {
  return std::make_unique<LlamaDecoderLayer>(config, index);
}

}  // namespace

CENSUS_FAMILY(kLlamaFamily) = {.model_type = "llama", .read = read_llama, .build_layer = build_llama_layer,
                               .build_final_norm = build_llama_final_norm, .class_prefix = "Llama",
                               .names_llama_tp_plan = true,
    .liger_patches = true, .liger_kernels = true, .float8_linears = true,
    .peft_lora = true, .lora_default_targets = "q_proj,v_proj", .bnb_4bit = true, .autocast = true};

namespace {

Result<ModelConfig> read_llama(const ConfigReader& r) {
  CENSUS_ASSIGN(ModelConfig c, read_llama_like(r, kLlamaFamily, {32000, 4096, 11008, 32, 32, std::nullopt, std::nullopt}));
  CENSUS_TRY(read_attention_bias(r, c));
  CENSUS_ASSIGN(c.mlp_bias, r.flag("mlp_bias", false));
  return c;
}

}  // namespace

}  // namespace census
