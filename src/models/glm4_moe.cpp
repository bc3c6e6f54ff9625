// GLM-4.5 / 4.6 / 4.7 (transformers/models/glm4_moe/modeling_glm4_moe.py, Transformers 5): Llama's
// attention with biased q/k/v projections, optional per-head q/k RMSNorm and a partial rotary (half
// of each head by default); a dense MLP on the first first_k_dense_replace layers and, on the rest,
// Glm4MoeMoE: DeepSeek-V3's group-limited sigmoid router (its correction bias made in fp32), the
// routed experts and the shared experts (nn/deepseek_moe.h).
//
// Legend: S = seq_length, H = hidden_size, Nh = heads, Nkv = key/value heads, D = head_dim,
// R = rotary_dim (int(D * partial_rotary_factor)).
#include "models/deepseek_v3.h"
#include "models/llama.h"
#include "nn/deepseek_moe.h"
#include "nn/pre_norm_layer.h"
#include "ops/ops.h"

namespace census {
namespace {

class Glm4MoeAttention {
 public:
  Glm4MoeAttention(const ModelConfig& c, nn::ParameterList& params)
      : kernels_(c.kernels),
        head_dim_(c.head_dim),
        q_proj("self_attn.q_proj", c.hidden_size, c.num_attention_heads * c.head_dim, c.qkv_bias, params),
        k_proj("self_attn.k_proj", c.hidden_size, c.num_key_value_heads * c.head_dim, c.qkv_bias, params),
        v_proj("self_attn.v_proj", c.hidden_size, c.num_key_value_heads * c.head_dim, c.qkv_bias, params),
        o_proj("self_attn.o_proj", c.num_attention_heads * c.head_dim, c.hidden_size, /*bias=*/false, params) {
    if (c.qk_norm) {
      q_norm.emplace("self_attn.q_norm", c.head_dim, c.rms_norm_eps, params);
      k_norm.emplace("self_attn.k_norm", c.head_dim, c.rms_norm_eps, params);
    }
  }

  Tensor forward(const Tensor& hidden_states, const nn::PositionEmbeddings& positions) const {
    ModuleScope scope("self_attn", ModuleKind::kOther);
    const int64_t batch = hidden_states.size(0), seq = hidden_states.size(1);
    auto heads = [&](const Tensor& x) { return ops::view(x, Dims{batch, seq, x.size(-1) / head_dim_, head_dim_}); };
    // The three projections viewed (1, S, N, D), normed where use_qk_norm, then transposed.
    Tensor query_states = heads(q_proj.forward(hidden_states));
    Tensor key_states = heads(k_proj.forward(hidden_states));
    Tensor value_states = heads(v_proj.forward(hidden_states));
    if (q_norm) {
      query_states = q_norm->forward(query_states);
      key_states = k_norm->forward(key_states);
    }
    query_states = ops::transpose(query_states, 1, 2);  // (1, Nh, S, D)
    key_states = ops::transpose(key_states, 1, 2);      // (1, Nkv, S, D)
    value_states = ops::transpose(value_states, 1, 2);
    // The first R channels of each head rotate (cos and sin are R wide), the rest pass.
    auto [q_embed, k_embed] = nn::apply_partial_rotary_pos_emb(query_states, key_states, positions.cos, positions.sin);
    query_states = q_embed;
    key_states = k_embed;
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
  nn::Linear o_proj;  // Nh*D -> H, never biased
  std::optional<nn::LlamaRMSNorm> q_norm;  // over D, where use_qk_norm
  std::optional<nn::LlamaRMSNorm> k_norm;
};

// Glm4MoeMoE where the layer is sparse (Glm4MoeTopkRouter makes its correction bias fp32), else Glm4MoeMLP.
std::unique_ptr<nn::FeedForward> build_glm4_moe_mlp(const ModelConfig& c, int64_t index, nn::ParameterList& params) {
  return build_group_limited_mlp(c, index, params, DType::kFloat32);
}

class Glm4MoeDecoderLayer final : public DecoderLayer {
 public:
  Glm4MoeDecoderLayer(const ModelConfig& c, int64_t index)
      : hidden_size_(c.hidden_size),
        self_attn(c, parameters_),
        mlp(build_glm4_moe_mlp(c, index, parameters_)),
        input_layernorm("input_layernorm", c.hidden_size, c.rms_norm_eps, parameters_),
        post_attention_layernorm("post_attention_layernorm", c.hidden_size, c.rms_norm_eps, parameters_),
        rotary_emb(c.rotary_dim) {}
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
  Glm4MoeAttention self_attn;
  std::unique_ptr<nn::FeedForward> mlp;  // Glm4MoeMoE from first_k_dense_replace on, else Glm4MoeMLP
  nn::LlamaRMSNorm input_layernorm;
  nn::LlamaRMSNorm post_attention_layernorm;
  nn::RotaryEmbedding rotary_emb;  // R wide
};

Result<ModelConfig> read_glm4_moe(const ConfigReader& r);

std::unique_ptr<DecoderLayer> build_glm4_moe_layer(const ModelConfig& config, int64_t index) {
  return std::make_unique<Glm4MoeDecoderLayer>(config, index);
}

}  // namespace

CENSUS_FAMILY(kGlm4MoeFamily) = {"glm4_moe", read_glm4_moe, build_glm4_moe_layer, build_llama_final_norm};

namespace {

// Glm4MoeConfig: no head_dim field (hidden // heads, floored as Glm4MoeAttention floors it, unless the
// config states it, as checkpoints do: the defaults' 4096 // 96 is 42);
// attention_bias biases q, k and v only; use_qk_norm; partial_rotary_factor 0.5 unless stated;
// 128 routed experts of 1408, top 8, one shared expert, one dense layer, one group; the MTP layers
// (num_nextn_predict_layers, which attribute_map also names num_mtp_layers).
Result<ModelConfig> read_glm4_moe(const ConfigReader& r) {
  CENSUS_ASSIGN(const int64_t hidden, r.size("hidden_size", 4096));
  CENSUS_ASSIGN(const int64_t heads, r.size("num_attention_heads", 96));
  CENSUS_ASSIGN(ModelConfig c, read_llama_like(r, kGlm4MoeFamily, {151552, 4096, 10944, 46, 96, 8, hidden / heads}));
  CENSUS_ASSIGN(c.qkv_bias, r.flag("attention_bias", false));
  c.o_bias = false;
  CENSUS_ASSIGN(c.qk_norm, r.flag("use_qk_norm", false));
  CENSUS_TRY(read_rotary_dim(r, c, 0.5));
  CENSUS_TRY(read_group_limited_moe(r, {128, 8, 1408, 1, 1, 1, 1, 1.0}, c));
  const char* mtp_field = r.has("num_nextn_predict_layers") || !r.has("num_mtp_layers") ? "num_nextn_predict_layers"
                                                                                         : "num_mtp_layers";
  CENSUS_ASSIGN(c.num_mtp_layers, r.count(mtp_field, 1));
  return c;
}

}  // namespace
}  // namespace census
