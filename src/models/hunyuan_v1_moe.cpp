// Hunyuan-MoE (transformers/models/hunyuan_v1_moe/modeling_hunyuan_v1_moe.py, Transformers 5): Llama's
// attention (every projection biased by attention_bias) with per-head query/key RMSNorms applied after
// the rotary, and HunYuanMoEV1Moe on every layer: a shared MLP of intermediate_size, the fp32 softmax
// router (its linear wg built in fp32) and experts of intermediate_size (nn/hunyuan_moe.h).
//
// Legend: S = seq_length, H = hidden_size, Nh = heads, Nkv = key/value heads, D = head_dim.
#include "models/llama.h"
#include "models/moe_layers.h"
#include "nn/hunyuan_moe.h"
#include "nn/pre_norm_layer.h"
#include "ops/ops.h"

namespace census {
namespace {

class HunYuanMoEV1Attention {
 public:
  HunYuanMoEV1Attention(const ModelConfig& c, nn::ParameterList& params)
      : kernels_(c.kernels),
        head_dim_(c.head_dim),
        q_proj("self_attn.q_proj", c.hidden_size, c.num_attention_heads * c.head_dim, c.qkv_bias, params),
        k_proj("self_attn.k_proj", c.hidden_size, c.num_key_value_heads * c.head_dim, c.qkv_bias, params),
        v_proj("self_attn.v_proj", c.hidden_size, c.num_key_value_heads * c.head_dim, c.qkv_bias, params),
        o_proj("self_attn.o_proj", c.num_attention_heads * c.head_dim, c.hidden_size, c.o_bias, params),
        query_layernorm("self_attn.query_layernorm", c.head_dim, c.rms_norm_eps, params),
        key_layernorm("self_attn.key_layernorm", c.head_dim, c.rms_norm_eps, params) {}

  Tensor forward(const Tensor& hidden_states, const nn::PositionEmbeddings& positions) const {
    ModuleScope scope("self_attn", ModuleKind::kOther);
    const int64_t batch = hidden_states.size(0), seq = hidden_states.size(1);
    auto heads = [&](const Tensor& x) {
      return ops::transpose(ops::view(x, Dims{batch, seq, x.size(-1) / head_dim_, head_dim_}), 1, 2);
    };
    Tensor query_states = heads(q_proj.forward(hidden_states));  // (1, Nh, S, D)
    Tensor key_states = heads(k_proj.forward(hidden_states));    // (1, Nkv, S, D)
    Tensor value_states = heads(v_proj.forward(hidden_states));
    auto [q_embed, k_embed] = nn::apply_rotary_pos_emb(query_states, key_states, positions.cos, positions.sin);
    query_states = query_layernorm.forward(q_embed);  // over D, after the rotary
    key_states = key_layernorm.forward(k_embed);
    q_embed = Tensor();
    k_embed = Tensor();
    Tensor attn_output = nn::flash_attention_forward(query_states, key_states, value_states, kernels_);  // (1, S, Nh, D)
    attn_output = ops::contiguous(ops::reshape(attn_output, Dims{batch, seq, attn_output.size(2) * attn_output.size(3)}));
    return o_proj.forward(attn_output);
  }

 private:
  nn::KernelProfile kernels_;
  int64_t head_dim_;
  nn::Linear q_proj;  // H -> Nh*D, biased by attention_bias
  nn::Linear k_proj;  // H -> Nkv*D
  nn::Linear v_proj;  // H -> Nkv*D
  nn::Linear o_proj;  // Nh*D -> H
  nn::LlamaRMSNorm query_layernorm;  // over D
  nn::LlamaRMSNorm key_layernorm;
};

std::unique_ptr<nn::FeedForward> build_hunyuan_moe_mlp(const ModelConfig& c, int64_t index, nn::ParameterList& params) {
  nn::HunYuanMoEV1Gate gate("mlp.gate", c.moe.num_experts, c.moe.num_experts_per_tok, c.hidden_size, params);
  return std::make_unique<nn::HunYuanMoEV1Moe>("mlp", std::move(gate),
                                               make_routed_experts(c, index, c.moe.moe_intermediate_size, params),
                                               c.hidden_size, c.intermediate_size, c.hidden_act, params);
}

class HunYuanMoEV1DecoderLayer final : public DecoderLayer {
 public:
  HunYuanMoEV1DecoderLayer(const ModelConfig& c, int64_t index)
      : hidden_size_(c.hidden_size),
        self_attn(c, parameters_),
        mlp(build_hunyuan_moe_mlp(c, index, parameters_)),
        input_layernorm("input_layernorm", c.hidden_size, c.rms_norm_eps, parameters_),
        post_attention_layernorm("post_attention_layernorm", c.hidden_size, c.rms_norm_eps, parameters_),
        rotary_emb(c.head_dim) {}
  nn::PositionEmbeddings embed_positions(const Tensor& hidden) const override { return rotary_emb.forward(hidden); }
  Tensor forward(const Tensor& input, const nn::PositionEmbeddings& positions) const override {
    return nn::pre_norm_layer_forward(
        input, input_layernorm, [&](const Tensor& normed) { return self_attn.forward(normed, positions); },
        post_attention_layernorm, *mlp);
  }
  int64_t final_norm_parameters() const override { return hidden_size_; }

  std::vector<Tensor> registered_buffers() const override { return mlp->buffers(); }

 private:
  int64_t hidden_size_;
  HunYuanMoEV1Attention self_attn;
  std::unique_ptr<nn::FeedForward> mlp;  // HunYuanMoEV1Moe
  nn::LlamaRMSNorm input_layernorm;
  nn::LlamaRMSNorm post_attention_layernorm;
  nn::RotaryEmbedding rotary_emb;
};

Result<ModelConfig> read_hunyuan_v1_moe(const ConfigReader& r);

std::unique_ptr<DecoderLayer> build_hunyuan_v1_moe_layer(const ModelConfig& config, int64_t index) {
  return std::make_unique<HunYuanMoEV1DecoderLayer>(config, index);
}

}  // namespace

CENSUS_FAMILY(kHunYuanMoEV1Family) = {"hunyuan_v1_moe", read_hunyuan_v1_moe, build_hunyuan_v1_moe_layer,
                                      build_llama_final_norm};

namespace {

// A field Hunyuan states as one integer or as one per layer (num_experts, moe_topk): a list is priced
// where every layer has the same value (a layer census runs one layer's router as every layer's). Each
// layer indexes the list, so a longer one runs with its first entries.
Result<int64_t> read_uniform_size(const ConfigReader& r, const char* field, int64_t fallback, int64_t layers) {
  if (!r.has(field) || !r.json().at(field).is_array()) return r.size(field, fallback);
  const nlohmann::json& values = r.json().at(field);
  CENSUS_TRY(check_per_layer(field, static_cast<int64_t>(values.size()), layers, PerLayer::kCut));
  int64_t size = 0;
  for (int64_t i = 0; i < layers; ++i) {
    const nlohmann::json entry = {{field, values[static_cast<size_t>(i)]}};
    CENSUS_ASSIGN(const int64_t each, ConfigReader(entry).size(field, std::nullopt));
    if (i > 0 && each != size)
      return refuse(field, "differs across layers (" + shown(values) +
                               "); Census prices one value for every layer: state one integer");
    size = each;
  }
  return size;
}

// HunYuanMoEV1Config: num_experts (attribute_map: num_local_experts) experts, moe_topk (alias
// num_experts_per_tok) a token, each of intermediate_size, beside a shared MLP of intermediate_size, on
// every layer; num_key_value_heads as many as heads unless stated; attention_bias for q, k, v and o.
Result<ModelConfig> read_hunyuan_v1_moe(const ConfigReader& r) {
  CENSUS_ASSIGN(ModelConfig c,
                read_llama_like(r, kHunYuanMoEV1Family, {290943, 4096, 11008, 32, 32, std::nullopt, std::nullopt}));
  CENSUS_TRY(read_attention_bias(r, c));
  const char* experts_field = r.has("num_experts") || !r.has("num_local_experts") ? "num_experts" : "num_local_experts";
  const char* top_k_field = r.has("moe_topk") || !r.has("num_experts_per_tok") ? "moe_topk" : "num_experts_per_tok";
  CENSUS_ASSIGN(c.moe.num_experts, read_uniform_size(r, experts_field, 1, c.num_hidden_layers));
  CENSUS_ASSIGN(c.moe.num_experts_per_tok, read_uniform_size(r, top_k_field, 1, c.num_hidden_layers));
  if (c.moe.num_experts_per_tok > c.moe.num_experts)
    return refuse(top_k_field, std::to_string(c.moe.num_experts_per_tok) + " exceeds the " +
                                   std::to_string(c.moe.num_experts) + " experts; a token cannot pick more experts than there are");
  CENSUS_ASSIGN(const std::string implementation, r.text("_experts_implementation", "grouped_mm"));
  if (implementation != "grouped_mm" && implementation != "eager")
    return refuse("_experts_implementation", "'" + implementation + "' is not priced; use grouped_mm or eager");
  c.moe.experts_implementation =
      implementation == "eager" ? nn::ExpertsImplementation::kEager : nn::ExpertsImplementation::kGroupedMm;
  c.moe.moe_intermediate_size = c.intermediate_size;
  return c;
}

}  // namespace
}  // namespace census
