#include "models/qwen3_next.h"

#include <cassert>

#include "models/llama.h"
#include "models/moe_layers.h"
#include "models/qwen2_moe.h"
#include "nn/attention_kernel.h"
#include "nn/causal_conv1d.h"
#include "nn/gated_delta_rule.h"
#include "nn/pre_norm_layer.h"
#include "ops/ops.h"

namespace census {

// ---- Qwen3NextGatedDeltaNet ----

struct Qwen3NextGatedDeltaNet::Ordered {
  Tensor query, key, value, z, b, a;
};

Qwen3NextGatedDeltaNet::Qwen3NextGatedDeltaNet(const ModelConfig& c, nn::ParameterList& params)
    : num_v_heads_(c.linear_num_value_heads), num_k_heads_(c.linear_num_key_heads),
      head_k_dim_(c.linear_key_head_dim), head_v_dim_(c.linear_value_head_dim),
      key_dim_(c.linear_key_head_dim * c.linear_num_key_heads),
      value_dim_(c.linear_value_head_dim * c.linear_num_value_heads), activation_(c.hidden_act),
      backend_(c.gdn_backend),
      conv1d_weight_(nn::register_parameter(params, "linear_attn.conv1d", "weight",
                                            Dims{2 * key_dim_ + value_dim_, 1, c.linear_conv_kernel_dim})),
      in_proj_qkvz("linear_attn.in_proj_qkvz", c.hidden_size, 2 * key_dim_ + 2 * value_dim_, false, params),
      in_proj_ba("linear_attn.in_proj_ba", c.hidden_size, 2 * num_v_heads_, false, params),
      dt_bias_(nn::register_parameter(params, "linear_attn", "dt_bias", Dims{num_v_heads_})),
      A_log_(nn::register_parameter(params, "linear_attn", "A_log", Dims{num_v_heads_})),
      norm("linear_attn.norm", head_v_dim_, c.rms_norm_eps, params),
      out_proj("linear_attn.out_proj", value_dim_, c.hidden_size, false, params) {}

// The fused projections hold, per key head, [q (Dk), k (Dk), v (r*Dv), z (r*Dv)] and [b (r), a (r)]:
// splitting them gives strided views, and regrouping v, z, b and a by value head copies them (a view
// only when there is one key head).
Qwen3NextGatedDeltaNet::Ordered Qwen3NextGatedDeltaNet::fix_query_key_value_ordering(const Tensor& mixed_qkvz,
                                                                                       const Tensor& mixed_ba) const {
  const int64_t batch = mixed_qkvz.size(0), seq = mixed_qkvz.size(1);
  const int64_t r = num_v_heads_ / num_k_heads_;
  Tensor qkvz = ops::view(mixed_qkvz, Dims{batch, seq, num_k_heads_, 2 * head_k_dim_ + 2 * head_v_dim_ * r});
  Tensor ba = ops::view(mixed_ba, Dims{batch, seq, num_k_heads_, 2 * r});
  std::vector<Tensor> q_k_v_z = ops::split_with_sizes(qkvz, {head_k_dim_, head_k_dim_, r * head_v_dim_, r * head_v_dim_}, 3);
  std::vector<Tensor> b_a = ops::split_with_sizes(ba, {r, r}, 3);
  Ordered out{q_k_v_z[0], q_k_v_z[1], q_k_v_z[2], q_k_v_z[3], b_a[0], b_a[1]};
  out.value = ops::reshape(out.value, Dims{batch, seq, num_v_heads_, head_v_dim_});  // (1, S, Nv, Dv)
  out.z = ops::reshape(out.z, Dims{batch, seq, num_v_heads_, head_v_dim_});
  out.b = ops::reshape(out.b, Dims{batch, seq, num_v_heads_});                       // (1, S, Nv)
  out.a = ops::reshape(out.a, Dims{batch, seq, num_v_heads_});
  return out;
}

Tensor Qwen3NextGatedDeltaNet::forward(const Tensor& hidden_states) const {
  ModuleScope scope(path_, ModuleKind::kOther);
  const int64_t batch = hidden_states.size(0), seq = hidden_states.size(1);
  // apply_mask_to_padding_states: no mask for a full sequence, no op.
  Ordered o;
  {
    Tensor projected_states_qkvz = in_proj_qkvz.forward(hidden_states);  // (1, S, 2*Nk*Dk + 2*Nv*Dv)
    Tensor projected_states_ba = in_proj_ba.forward(hidden_states);      // (1, S, 2*Nv)
    o = fix_query_key_value_ordering(projected_states_qkvz, projected_states_ba);
  }
  o.query = ops::reshape(o.query, Dims{batch, seq, key_dim_});  // copies: the heads are strided
  o.key = ops::reshape(o.key, Dims{batch, seq, key_dim_});
  o.value = ops::reshape(o.value, Dims{batch, seq, value_dim_});  // a view of the copy above

  Tensor mixed_qkv = ops::cat({o.query, o.key, o.value}, -1);  // (1, S, conv_dim) bf16
  o.query = o.key = o.value = Tensor();
  mixed_qkv = ops::transpose(mixed_qkv, 1, 2);  // (1, conv_dim, S), a view
  Tensor conv_weight = ops::squeeze(conv1d_weight_, 1);  // (conv_dim, K)
  mixed_qkv = nn::causal_conv1d_fn(mixed_qkv, conv_weight, activation_);
  conv_weight = Tensor();
  mixed_qkv = ops::transpose(mixed_qkv, 1, 2);  // (1, S, conv_dim)
  std::vector<Tensor> qkv = ops::split_with_sizes(mixed_qkv, {key_dim_, key_dim_, value_dim_}, -1);
  mixed_qkv = Tensor();
  Tensor query = ops::reshape(qkv[0], Dims{batch, seq, key_dim_ / head_k_dim_, head_k_dim_});  // views
  Tensor key = ops::reshape(qkv[1], Dims{batch, seq, key_dim_ / head_k_dim_, head_k_dim_});
  Tensor value = ops::reshape(qkv[2], Dims{batch, seq, value_dim_ / head_v_dim_, head_v_dim_});
  qkv.clear();

  Tensor beta = ops::sigmoid(o.b);  // (1, S, Nv) bf16
  // g = -A_log.float().exp() * softplus(a.float() + dt_bias)   (1, S, Nv) fp32
  Tensor decay_rate = ops::neg(ops::exp(ops::to(A_log_, DType::kFloat32)));
  Tensor g = ops::mul(decay_rate, ops::softplus(ops::add(ops::to(o.a, DType::kFloat32), dt_bias_)));
  decay_rate = Tensor();
  if (num_v_heads_ / num_k_heads_ > 1) {
    query = ops::repeat_interleave(query, num_v_heads_ / num_k_heads_, 2);  // (1, S, Nv, Dk) copies
    key = ops::repeat_interleave(key, num_v_heads_ / num_k_heads_, 2);
  }
  Tensor core_attn_out = nn::chunk_gated_delta_rule(backend_, path_, query, key, value, g, beta);
  query = key = value = g = beta = Tensor();

  const Dims z_shape = o.z.sizes();
  core_attn_out = ops::reshape(core_attn_out, Dims{core_attn_out.numel() / head_v_dim_, head_v_dim_});
  Tensor z = ops::reshape(o.z, Dims{o.z.numel() / head_v_dim_, head_v_dim_});
  o = Ordered{};
  core_attn_out = norm.forward(core_attn_out, z);
  z = Tensor();
  core_attn_out = ops::reshape(core_attn_out, z_shape);
  core_attn_out = ops::reshape(core_attn_out, Dims{batch, seq, value_dim_});
  return out_proj.forward(core_attn_out);
}

// ---- Qwen3NextDecoderLayer ----

Qwen3NextDecoderLayer::Qwen3NextDecoderLayer(const ModelConfig& c, int64_t layer_idx)
    : hidden_size_(c.hidden_size),
      input_layernorm("input_layernorm", c.hidden_size, c.rms_norm_eps, parameters_),
      post_attention_layernorm("post_attention_layernorm", c.hidden_size, c.rms_norm_eps, parameters_),
      rotary_emb(c.rotary_dim > 0 ? c.rotary_dim : c.head_dim) {
  if (c.layer_types[layer_idx] == "linear_attention") linear_attn.emplace(c, parameters_);
  else self_attn.emplace(attention_sizes(c), c.kernels, parameters_);
  // The feed-forward, registered after the attention as the module is: Qwen3NextSparseMoeBlock (the
  // Qwen2-MoE block: router, experts, a sigmoid-gated shared expert) where the layer is sparse.
  mlp = build_qwen2_moe_mlp(c, layer_idx, parameters_);
}

Tensor Qwen3NextDecoderLayer::forward(const Tensor& input, const nn::PositionEmbeddings& positions) const {
  return nn::pre_norm_layer_forward(
      input, input_layernorm, [&](const Tensor& normed) { return linear_attn ? linear_attn->forward(normed) : self_attn->forward(normed, positions); }, post_attention_layernorm, *mlp);
}

nn::AttentionSizes attention_sizes(const ModelConfig& c) {
  return {c.hidden_size, c.num_attention_heads, c.num_key_value_heads, c.head_dim, c.qkv_bias, c.o_bias, c.rms_norm_eps};
}

std::unique_ptr<nn::Norm> build_qwen3_next_final_norm(const ModelConfig& config, nn::ParameterList& params) {
  return std::make_unique<nn::GemmaRMSNorm>("norm", config.hidden_size, config.rms_norm_eps, params);
}

}  // namespace census

// ---- Qwen3NextConfig ----

namespace census {
namespace {

// remap_legacy_layer_types: the names older configs use for the two kinds.
std::string current_layer_type(const std::string& type) {
  if (type == "attention") return "full_attention";
  if (type == "mamba" || type == "conv") return "linear_attention";
  return type;
}

// layer_types as stated (legacy names remapped), else linear attention but for every
// full_attention_interval-th layer.
Status read_layer_types(const ConfigReader& r, ModelConfig& c) {
  c.layer_types.clear();
  if (!r.has("layer_types")) {
    auto interval = r.size("full_attention_interval", 4);
    CENSUS_TRY(interval);
    for (int64_t i = 0; i < c.num_hidden_layers; ++i)
      c.layer_types.push_back((i + 1) % *interval ? "linear_attention" : "full_attention");
    return {};
  }
  CENSUS_ASSIGN(const std::vector<std::string> types,
                r.layer_kinds("layer_types", c.num_hidden_layers,
                              {"linear_attention", "full_attention", "mamba", "attention", "conv"}));
  for (const std::string& type : types) c.layer_types.push_back(current_layer_type(type));
  return {};
}

// Qwen3NextConfig's experts: Qwen2-MoE's block with its own defaults (512 experts of width 512,
// top 10, renormalized, a shared expert of 512), sparse on every decoder_sparse_step-th layer not in
// mlp_only_layers.
Status read_moe_layers(const ConfigReader& r, ModelConfig& c) {
  CENSUS_TRY(read_routed_experts(r, "num_experts", "num_local_experts", 512, 10, c.moe));
  CENSUS_TRY(read_qwen_sparse_layers(r, c, /*default_moe_width=*/512, /*default_norm_topk_prob=*/true));
  auto shared = r.size("shared_expert_intermediate_size", 512);
  CENSUS_TRY(shared);
  c.moe.shared_expert_intermediate_size = *shared;
  return {};
}

}  // namespace

Result<ModelConfig> read_gated_delta_net_config(const ConfigReader& r, const Family& family,
                                                const LlamaLikeDefaults& defaults) {
  auto c = read_llama_like(r, family, defaults);
  CENSUS_TRY(c);
  auto attention_bias = r.flag("attention_bias", false);
  CENSUS_TRY(attention_bias);
  c->qkv_bias = c->o_bias = *attention_bias;
  c->qk_norm = true;
  auto kernel = r.size("linear_conv_kernel_dim", 4);
  CENSUS_TRY(kernel);
  auto key_head_dim = r.size("linear_key_head_dim", 128);
  CENSUS_TRY(key_head_dim);
  auto value_head_dim = r.size("linear_value_head_dim", 128);
  CENSUS_TRY(value_head_dim);
  auto key_heads = r.size("linear_num_key_heads", 16);
  CENSUS_TRY(key_heads);
  auto value_heads = r.size("linear_num_value_heads", 32);
  CENSUS_TRY(value_heads);
  if (*value_heads % *key_heads != 0)
    return refuse("linear_num_value_heads", std::to_string(*value_heads) + " is not a multiple of linear_num_key_heads " +
                                                std::to_string(*key_heads) + "; fix the config");
  c->linear_conv_kernel_dim = *kernel;
  c->linear_key_head_dim = *key_head_dim;
  c->linear_value_head_dim = *value_head_dim;
  c->linear_num_key_heads = *key_heads;
  c->linear_num_value_heads = *value_heads;
  CENSUS_TRY(read_rotary_dim(r, *c, 0.25));
  CENSUS_TRY(read_layer_types(r, *c));
  return c;
}

namespace {

Result<ModelConfig> read_qwen3_next(const ConfigReader& r);

std::unique_ptr<DecoderLayer> build_qwen3_next_layer(const ModelConfig& config, int64_t index) {
  return std::make_unique<Qwen3NextDecoderLayer>(config, index);
}

}  // namespace

CENSUS_FAMILY(kQwen3NextFamily) = {.model_type = "qwen3_next", .read = read_qwen3_next, .build_layer = build_qwen3_next_layer, .build_final_norm = build_qwen3_next_final_norm, .liger_patches = true,
                                  .peft_lora = true, .peft_expert_names = "gate,gate_proj,up_proj,down_proj", .bnb_4bit = true, .autocast = true};

namespace {

// Qwen3NextConfig: head_dim 256, two KV heads, a gated delta net on three layers of four, and 512
// experts on every layer unless mlp_only_layers or decoder_sparse_step say otherwise.
Result<ModelConfig> read_qwen3_next(const ConfigReader& r) {
  auto c = read_gated_delta_net_config(r, kQwen3NextFamily, {151936, 2048, 5632, 48, 16, 2, 256});
  CENSUS_TRY(c);
  CENSUS_TRY(read_moe_layers(r, *c));
  return c;
}

}  // namespace
}  // namespace census
