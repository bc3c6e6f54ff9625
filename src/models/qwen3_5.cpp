#include "models/qwen3_vl.h"
#include "models/qwen3_5.h"

#include "models/moe_layers.h"
#include "models/qwen2_moe.h"
#include "models/llama.h"
#include "nn/causal_conv1d.h"
#include "nn/gated_delta_rule.h"
#include "nn/pre_norm_layer.h"
#include "ops/ops.h"

namespace census {

Qwen3_5GatedDeltaNet::Qwen3_5GatedDeltaNet(const ModelConfig& c, nn::ParameterList& params)
    : num_v_heads_(c.linear_num_value_heads), num_k_heads_(c.linear_num_key_heads),
      head_k_dim_(c.linear_key_head_dim), head_v_dim_(c.linear_value_head_dim),
      key_dim_(c.linear_key_head_dim * c.linear_num_key_heads),
      value_dim_(c.linear_value_head_dim * c.linear_num_value_heads), activation_(c.hidden_act),
      backend_(c.gdn_backend),
      conv1d_weight_(nn::register_parameter(params, "linear_attn.conv1d", "weight",
                                            Dims{2 * key_dim_ + value_dim_, 1, c.linear_conv_kernel_dim})),
      dt_bias_(nn::register_parameter(params, "linear_attn", "dt_bias", Dims{num_v_heads_})),
      A_log_(nn::register_parameter(params, "linear_attn", "A_log", Dims{num_v_heads_})),
      norm("linear_attn.norm", head_v_dim_, c.rms_norm_eps, params),
      out_proj("linear_attn.out_proj", value_dim_, c.hidden_size, false, params),
      in_proj_qkv("linear_attn.in_proj_qkv", c.hidden_size, 2 * key_dim_ + value_dim_, false, params),
      in_proj_z("linear_attn.in_proj_z", c.hidden_size, value_dim_, false, params),
      in_proj_b("linear_attn.in_proj_b", c.hidden_size, num_v_heads_, false, params),
      in_proj_a("linear_attn.in_proj_a", c.hidden_size, num_v_heads_, false, params) {}

Tensor Qwen3_5GatedDeltaNet::forward(const Tensor& hidden_states) const {
  ModuleScope scope(path_, ModuleKind::kOther);
  const int64_t batch = hidden_states.size(0), seq = hidden_states.size(1);
  Tensor mixed_qkv = ops::transpose(in_proj_qkv.forward(hidden_states), 1, 2);  // (1, W, S), a view
  Tensor z = in_proj_z.forward(hidden_states);
  z = ops::reshape(z, Dims{batch, seq, value_dim_ / head_v_dim_, head_v_dim_});  // a view
  Tensor b = in_proj_b.forward(hidden_states);  // (1, S, Nv)
  Tensor a = in_proj_a.forward(hidden_states);
  Tensor conv_weight = ops::squeeze(conv1d_weight_, 1);
  mixed_qkv = nn::causal_conv1d_fn(mixed_qkv, conv_weight, activation_);  // saves the projection itself
  conv_weight = Tensor();
  mixed_qkv = ops::transpose(mixed_qkv, 1, 2);
  std::vector<Tensor> qkv = ops::split_with_sizes(mixed_qkv, {key_dim_, key_dim_, value_dim_}, -1);
  mixed_qkv = Tensor();
  Tensor query = ops::reshape(qkv[0], Dims{batch, seq, key_dim_ / head_k_dim_, head_k_dim_});
  Tensor key = ops::reshape(qkv[1], Dims{batch, seq, key_dim_ / head_k_dim_, head_k_dim_});
  Tensor value = ops::reshape(qkv[2], Dims{batch, seq, value_dim_ / head_v_dim_, head_v_dim_});
  qkv.clear();

  Tensor beta = ops::sigmoid(b);
  Tensor decay_rate = ops::neg(ops::exp(ops::to(A_log_, DType::kFloat32)));
  Tensor g = ops::mul(decay_rate, ops::softplus(ops::add(ops::to(a, DType::kFloat32), dt_bias_)));
  decay_rate = b = a = Tensor();
  if (num_v_heads_ / num_k_heads_ > 1) {
    query = ops::repeat_interleave(query, num_v_heads_ / num_k_heads_, 2);
    key = ops::repeat_interleave(key, num_v_heads_ / num_k_heads_, 2);
  }
  Tensor core_attn_out = nn::chunk_gated_delta_rule(backend_, path_, query, key, value, g, beta);
  query = key = value = g = beta = Tensor();

  core_attn_out = ops::reshape(core_attn_out, Dims{core_attn_out.numel() / head_v_dim_, head_v_dim_});
  z = ops::reshape(z, Dims{z.numel() / head_v_dim_, head_v_dim_});
  core_attn_out = norm.forward(core_attn_out, z);
  z = Tensor();
  core_attn_out = ops::reshape(core_attn_out, Dims{batch, seq, value_dim_});
  return out_proj.forward(core_attn_out);
}

Qwen3_5DecoderLayer::Qwen3_5DecoderLayer(const ModelConfig& c, int64_t layer_idx)
    : hidden_size_(c.hidden_size),
      input_layernorm("input_layernorm", c.hidden_size, c.rms_norm_eps, parameters_),
      post_attention_layernorm("post_attention_layernorm", c.hidden_size, c.rms_norm_eps, parameters_),
      rotary_emb(c.rotary_dim) {
  if (c.layer_types[layer_idx] == "linear_attention") linear_attn.emplace(c, parameters_);
  else self_attn.emplace(attention_sizes(c), c.kernels, parameters_);
  mlp = build_qwen2_moe_mlp(c, layer_idx, parameters_);  // registered after the attention, as the module is
}

Tensor Qwen3_5DecoderLayer::forward(const Tensor& input, const nn::PositionEmbeddings& positions) const {
  return nn::pre_norm_layer_forward(
      input, input_layernorm, [&](const Tensor& normed) { return linear_attn ? linear_attn->forward(normed) : self_attn->forward(normed, positions); }, post_attention_layernorm, *mlp);
}

std::unique_ptr<DecoderLayer> build_qwen3_5_layer(const ModelConfig& config, int64_t index) {
  return std::make_unique<Qwen3_5DecoderLayer>(config, index);
}

namespace {

Result<ModelConfig> read_qwen3_5_text(const ConfigReader& r);

}  // namespace

CENSUS_FAMILY(kQwen3_5TextFamily) = {
    .model_type = "qwen3_5_text",
    .read = read_qwen3_5_text,
    .build_layer = build_qwen3_5_layer,
    .build_final_norm = build_qwen3_next_final_norm,
    .build_causal_lm = build_multi_grid_rotary_causal_lm,
    .liger_patches = true,
};

namespace {

// Qwen3_5TextConfig: Qwen3-Next's fields less the experts; larger defaults.
Result<ModelConfig> read_qwen3_5_text(const ConfigReader& r) {
  return read_gated_delta_net_config(r, kQwen3_5TextFamily, {248320, 4096, 12288, 32, 16, 4, 256});
}

}  // namespace
}  // namespace census
