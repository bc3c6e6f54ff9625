// MiMo-V2-Flash (transformers/models/mimo_v2_flash/modeling_mimo_v2_flash.py, Transformers 5): Llama's
// pre-norm layer with
//   - attention whose queries and keys are head_dim wide and values v_head_dim wide; the values scaled
//     by attention_value_scale (a Python number: nothing kept); a partial rotary of each layer type's
//     own rope_parameters (0.334 of head_dim by default);
//   - sliding layers with twice the key/value heads and per-head attention sinks (a parameter the
//     attention function receives; the flash contract keeps nothing of it); the window changes no shape;
//   - a dense MLP where mlp_layer_types says "dense" (the first layer by default), else MiMoV2FlashMoE:
//     DeepSeek-V3's group-limited sigmoid router and the routed experts, no shared experts.
//
// Legend: S = seq_length, H = hidden_size, Nh = heads, Nkv = key/value heads (2 Nkv in sliding layers),
// D = head_dim, Dv = v_head_dim.
#include <tuple>

#include "models/deepseek_v3.h"
#include "models/llama.h"
#include "models/moe_layers.h"
#include "models/rope_parameters.h"
#include "nn/deepseek_moe.h"
#include "nn/pre_norm_layer.h"
#include "ops/ops.h"

namespace census {
namespace {

bool is_sliding(const ModelConfig& c, int64_t index) {
  return c.layer_types[static_cast<size_t>(index)] == "sliding_attention";
}

class MiMoV2FlashAttention {
 public:
  MiMoV2FlashAttention(const ModelConfig& c, int64_t index, nn::ParameterList& params)
      : kernels_(c.kernels), head_dim_(c.head_dim), v_head_dim_(c.v_head_dim) {
    const int64_t kv_heads = is_sliding(c, index) ? 2 * c.num_key_value_heads : c.num_key_value_heads;
    // named_parameters lists the module's own sinks before its projections'.
    if (is_sliding(c, index)) sinks_ = nn::register_parameter(params, "self_attn", "sinks", Dims{c.num_attention_heads});
    q_proj.emplace("self_attn.q_proj", c.hidden_size, c.num_attention_heads * c.head_dim, c.qkv_bias, params);
    k_proj.emplace("self_attn.k_proj", c.hidden_size, kv_heads * c.head_dim, c.qkv_bias, params);
    v_proj.emplace("self_attn.v_proj", c.hidden_size, kv_heads * c.v_head_dim, c.qkv_bias, params);
    o_proj.emplace("self_attn.o_proj", c.num_attention_heads * c.v_head_dim, c.hidden_size, /*bias=*/false, params);
  }

  Tensor forward(const Tensor& hidden_states, const nn::PositionEmbeddings& positions) const {
    ModuleScope scope("self_attn", ModuleKind::kOther);
    const int64_t batch = hidden_states.size(0), seq = hidden_states.size(1);
    auto heads = [&](const nn::Linear& proj, int64_t width) {
      Tensor states = proj.forward(hidden_states);
      return ops::transpose(ops::view(states, Dims{batch, seq, states.size(-1) / width, width}), 1, 2);
    };
    Tensor query_states = heads(*q_proj, head_dim_);                                  // (1, Nh, S, D)
    Tensor key_states = heads(*k_proj, head_dim_);                                    // (1, Nkv, S, D)
    // * attention_value_scale (1.0 where null): runs whatever the number.
    Tensor value_states = ops::mul_number(heads(*v_proj, v_head_dim_), 0.707);        // (1, Nkv, S, Dv)
    auto [q_embed, k_embed] = nn::apply_partial_rotary_pos_emb(query_states, key_states, positions.cos, positions.sin);
    query_states = q_embed;
    key_states = k_embed;
    Tensor attn_output = nn::flash_attention_forward(query_states, key_states, value_states, kernels_);  // (1, S, Nh, Dv)
    attn_output = ops::contiguous(ops::reshape(attn_output, Dims{batch, seq, attn_output.size(2) * attn_output.size(3)}));
    return o_proj->forward(attn_output);
  }

 private:
  nn::KernelProfile kernels_;
  int64_t head_dim_;
  int64_t v_head_dim_;
  Tensor sinks_;  // (Nh), sliding layers only
  std::optional<nn::Linear> q_proj;  // H -> Nh*D
  std::optional<nn::Linear> k_proj;  // H -> Nkv*D
  std::optional<nn::Linear> v_proj;  // H -> Nkv*Dv
  std::optional<nn::Linear> o_proj;  // Nh*Dv -> H
};

// MiMoV2FlashMoE: DeepseekV3MoE without its shared experts.
class MiMoV2FlashMoE final : public nn::FeedForward {
 public:
  MiMoV2FlashMoE(const ModelConfig& c, int64_t index, nn::ParameterList& params)
      : experts(make_routed_experts(c, index, c.moe.moe_intermediate_size, params)),
        gate("mlp.gate", group_limited_routing(c.moe), c.hidden_size, params) {}
  Tensor forward(const Tensor& input) const override {
    ModuleScope scope("mlp", ModuleKind::kOther);
    const Dims orig_shape = input.sizes();
    const nn::Routing routing = gate.forward(input);
    Tensor hidden_states = ops::view(input, Dims{orig_shape[0] * orig_shape[1], orig_shape[2]});
    return ops::view(experts->forward(hidden_states, routing.indices, routing.weights), orig_shape);
  }
  std::vector<Tensor> buffers() const override { return {gate.e_score_correction_bias()}; }

 private:
  std::unique_ptr<nn::MoeExperts> experts;
  nn::DeepseekV3TopkRouter gate;
};

std::unique_ptr<nn::FeedForward> build_mimo_mlp(const ModelConfig& c, int64_t index, nn::ParameterList& params) {
  if (!is_moe_layer(c, index)) return build_dense_mlp(c, index, params);
  return std::make_unique<MiMoV2FlashMoE>(c, index, params);
}

class MiMoV2FlashDecoderLayer final : public DecoderLayer {
 public:
  MiMoV2FlashDecoderLayer(const ModelConfig& c, int64_t index)
      : hidden_size_(c.hidden_size),
        self_attn(c, index, parameters_),
        mlp(build_mimo_mlp(c, index, parameters_)),
        input_layernorm("input_layernorm", c.hidden_size, c.rms_norm_eps, parameters_),
        post_attention_layernorm("post_attention_layernorm", c.hidden_size, c.rms_norm_eps, parameters_),
        rotary_emb(c.rotary_dim) {}
  nn::PositionEmbeddings embed_positions(const Tensor& hidden) const override { return rotary_emb.forward(hidden); }
  int64_t final_norm_parameters() const override { return hidden_size_; }
  Tensor forward(const Tensor& input, const nn::PositionEmbeddings& positions) const override {
    return nn::pre_norm_layer_forward(
        input, input_layernorm, [&](const Tensor& normed) { return self_attn.forward(normed, positions); },
        post_attention_layernorm, *mlp);
  }

  std::vector<Tensor> registered_buffers() const override { return mlp->buffers(); }

 private:
  int64_t hidden_size_;
  MiMoV2FlashAttention self_attn;
  std::unique_ptr<nn::FeedForward> mlp;
  nn::LlamaRMSNorm input_layernorm;
  nn::LlamaRMSNorm post_attention_layernorm;
  nn::RotaryEmbedding rotary_emb;  // int(D * partial_rotary_factor) wide
};

// Each layer type's rotary width, int(D * partial_rotary_factor) from its rope_parameters entry (0.334
// by default). The widths of the two types must agree: a layer's census runs one rotary embedding.
Status read_rotary_dims(const ConfigReader& r, ModelConfig& c) {
  const nlohmann::json* rope = r.has("rope_parameters") ? &r.json().at("rope_parameters") : nullptr;
  std::vector<int64_t> widths;
  for (const char* type : {"full_attention", "sliding_attention"}) {
    const nlohmann::json* params = rope != nullptr && rope->is_object() && rope->contains(type) ? &rope->at(type) : nullptr;
    CENSUS_ASSIGN(const double factor, read_partial_rotary_factor(r, params, 0.334));
    CENSUS_ASSIGN(const int64_t width, rotary_width(c.head_dim, factor));
    widths.push_back(width);
  }
  if (widths[0] != widths[1])
    return refuse("rope_parameters", "gives full and sliding layers rotary widths " + std::to_string(widths[0]) +
                                         " and " + std::to_string(widths[1]) +
                                         "; one width for both is priced, state one partial_rotary_factor");
  c.rotary_dim = widths[0];
  return {};
}

Result<ModelConfig> read_mimo_v2_flash(const ConfigReader& r);

std::unique_ptr<DecoderLayer> build_mimo_v2_flash_layer(const ModelConfig& config, int64_t index);

}  // namespace

CENSUS_FAMILY(kMiMoV2FlashFamily) = {
    .model_type = "mimo_v2_flash",
    .read = read_mimo_v2_flash,
    .build_layer = build_mimo_v2_flash_layer,
    .build_final_norm = build_llama_final_norm,
    .rotary_per_layer_type = true,
};

namespace {

std::unique_ptr<DecoderLayer> build_mimo_v2_flash_layer(const ModelConfig& c, int64_t index) {
  return std::make_unique<MiMoV2FlashDecoderLayer>(c, index);
}

// mlp_layer_types: "dense" or "sparse" per layer; by default the first dense, the rest sparse.
Status read_mlp_layer_types(const ConfigReader& r, ModelConfig& c) {
  c.moe.mlp_only_layers.clear();
  if (!r.has("mlp_layer_types")) {
    c.moe.mlp_only_layers.push_back(0);
    return {};
  }
  CENSUS_ASSIGN(const std::vector<std::string> types,
                r.layer_kinds("mlp_layer_types", c.num_hidden_layers, {"dense", "sparse"}));
  for (size_t i = 0; i < types.size(); ++i)
    if (types[i] == "dense") c.moe.mlp_only_layers.push_back(static_cast<int64_t>(i));
  return {};
}

// The checkpoint's own fields, which MiMoV2FlashConfig drops (its conversion maps them): the per-layer
// hybrid_layer_pattern (1 sliding, 0 full) and moe_layer_freq (1 sparse, 0 dense), and the sliding
// layers' heads, which the native layer fixes at num_attention_heads queries and twice
// num_key_value_heads keys and values. Where a config states them they must say what is priced, or
// the config contradicts itself: it is refused rather than priced as one of its two readings.
Status check_checkpoint_fields(const ConfigReader& r, const ModelConfig& c) {
  const int64_t layers = c.num_hidden_layers;
  if (r.has("hybrid_layer_pattern")) {
    CENSUS_ASSIGN(const std::vector<bool> sliding, r.layer_flags("hybrid_layer_pattern", layers));
    for (int64_t i = 0; i < layers; ++i)
      if (sliding[static_cast<size_t>(i)] != is_sliding(c, i))
        return refuse("hybrid_layer_pattern", "makes layer " + std::to_string(i) + (sliding[static_cast<size_t>(i)] ? " sliding" : " full") +
                                                  ", where layer_types makes it " + c.layer_types[static_cast<size_t>(i)] +
                                                  " (Transformers reads layer_types); state the two alike");
  }
  if (r.has("moe_layer_freq")) {
    CENSUS_ASSIGN(const std::vector<bool> sparse, r.layer_flags("moe_layer_freq", layers));
    for (int64_t i = 0; i < layers; ++i)
      if (sparse[static_cast<size_t>(i)] != is_moe_layer(c, i))
        return refuse("moe_layer_freq", "makes layer " + std::to_string(i) + (sparse[static_cast<size_t>(i)] ? " sparse" : " dense") +
                                            ", where mlp_layer_types makes it " + (is_moe_layer(c, i) ? "sparse" : "dense") +
                                            " (Transformers reads mlp_layer_types); state the two alike");
  }
  const std::tuple<const char*, int64_t, const char*> sliding_sizes[] = {
      {"swa_num_attention_heads", c.num_attention_heads, "num_attention_heads"},
      {"swa_num_key_value_heads", 2 * c.num_key_value_heads, "twice num_key_value_heads"},
      {"swa_head_dim", c.head_dim, "head_dim"},
      {"swa_qk_head_dim", c.head_dim, "head_dim"},
      {"swa_v_head_dim", c.v_head_dim, "v_head_dim"}};
  for (const auto& [field, priced, what] : sliding_sizes) {
    if (!r.has(field)) continue;
    CENSUS_ASSIGN(const int64_t stated, r.size(field, std::nullopt));
    if (stated != priced)
      return refuse(field, std::to_string(stated) + " is not " + what + " (" + std::to_string(priced) +
                               "), which Transformers' sliding layers have; fix the config");
  }
  return {};
}

// MiMoV2FlashConfig: MiMo-V2-Flash's sizes by default (head_dim 192, v_head_dim 128); layer_types as
// stated, else full at layer 0 and every sixth, sliding between; n_routed_experts (num_local_experts).
Result<ModelConfig> read_mimo_v2_flash(const ConfigReader& r) {
  CENSUS_ASSIGN(ModelConfig c, read_llama_like(r, kMiMoV2FlashFamily, {152576, 4096, 16384, 48, 64, 4, 192}));
  CENSUS_ASSIGN(c.rms_norm_eps, r.positive_number("rms_norm_eps", 1e-5));
  CENSUS_ASSIGN(c.qkv_bias, r.flag("attention_bias", false));
  CENSUS_ASSIGN(c.v_head_dim, r.size("v_head_dim", 128));
  c.layer_types.clear();
  for (int64_t i = 0; i < c.num_hidden_layers; ++i)
    c.layer_types.push_back(i == 0 || (i + 1) % 6 == 0 ? "full_attention" : "sliding_attention");
  CENSUS_TRY(read_stated_layer_types(r, c));
  MoeConfig& moe = c.moe;
  CENSUS_TRY(read_routed_experts(r, "n_routed_experts", "num_local_experts", 256, 8, moe));
  CENSUS_ASSIGN(moe.moe_intermediate_size, r.size("moe_intermediate_size", 2048));
  CENSUS_ASSIGN(moe.n_group, r.size("n_group", 1));
  CENSUS_ASSIGN(moe.topk_group, r.size("topk_group", 1));
  CENSUS_ASSIGN(moe.norm_topk_prob, r.flag("norm_topk_prob", true));
  CENSUS_ASSIGN(moe.routed_scaling_factor, r.positive_number("routed_scaling_factor", 1.0));  // null: 1.0
  if (moe.num_experts % moe.n_group != 0 || moe.num_experts / moe.n_group < 2 || moe.topk_group > moe.n_group)
    return refuse("n_group", std::to_string(moe.n_group) + " groups (top " + std::to_string(moe.topk_group) +
                                 ") do not split the " + std::to_string(moe.num_experts) +
                                 " routed experts into groups of two or more; fix the config");
  CENSUS_TRY(read_mlp_layer_types(r, c));
  CENSUS_TRY(read_rotary_dims(r, c));
  CENSUS_TRY(check_checkpoint_fields(r, c));
  return c;
}

}  // namespace
}  // namespace census
