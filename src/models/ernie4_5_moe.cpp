// ERNIE-4.5-MoE (transformers/models/ernie4_5_moe/modeling_ernie4_5_moe.py, Transformers 5): Llama's
// attention with every projection biased as use_bias says, and ERNIE's rotary: cos and sin kept in
// fp32, their first halves repeated element-wise, the interleaved rotate_half (stack of the odd and
// even channels), the rotation computed on fp32 copies of q and k and cast back. A dense MLP where
// the layer is outside [moe_layer_start_index, moe_layer_end_index] or off moe_layer_interval, else
// Ernie4_5_MoeSparseMoeBlock (shared experts, the fp32 router with its correction bias, the routed
// experts; nn/ernie_moe.h).
//
// Legend: S = seq_length, H = hidden_size, Nh = heads, Nkv = key/value heads, D = head_dim.
#include "models/llama.h"
#include "models/moe_layers.h"
#include "nn/ernie_moe.h"
#include "nn/pre_norm_layer.h"
#include "ops/ops.h"

namespace census {
namespace {

// rotate_half: x1 = x[..., 0::2], x2 = x[..., 1::2]; stack((-x2, x1), dim=-1).flatten(-2).
Tensor ernie_rotate_half(const Tensor& x) {
  const Tensor x1 = ops::slice(x, -1, 0, x.size(-1), 2);
  const Tensor x2 = ops::slice(x, -1, 1, x.size(-1), 2);
  const Tensor stacked = ops::stack({ops::neg(x2), x1}, -1);  // (.., D/2, 2)
  return ops::reshape(stacked, Dims{x.sizes()[0], x.sizes()[1], x.sizes()[2], x.size(-1)});
}

// apply_rotary_pos_emb (GLM's style over the whole head, in full precision): cos and sin (fp32)
// unsqueezed on the head dim, cos[..., :D/2].repeat_interleave(2); q.float() * cos +
// rotate_half(q).float() * sin, and the same for k; both cast back to q's dtype.
std::pair<Tensor, Tensor> ernie_apply_rotary_pos_emb(const Tensor& q, const Tensor& k, const Tensor& cos_in,
                                                     const Tensor& sin_in) {
  const DType original_dtype = q.dtype();
  Tensor cos = ops::unsqueeze(cos_in, 1);
  Tensor sin = ops::unsqueeze(sin_in, 1);
  cos = ops::repeat_interleave(ops::slice(cos, -1, 0, cos.size(-1) / 2), 2, -1);
  sin = ops::repeat_interleave(ops::slice(sin, -1, 0, sin.size(-1) / 2), 2, -1);
  auto embed = [&](const Tensor& x) {
    Tensor rotated = ops::mul(ops::to(x, DType::kFloat32), cos);
    Tensor half = ops::mul(ops::to(ernie_rotate_half(x), DType::kFloat32), sin);
    return ops::add(rotated, half);
  };
  Tensor q_embed = embed(q);
  Tensor k_embed = embed(k);
  return {ops::to(q_embed, original_dtype), ops::to(k_embed, original_dtype)};
}

class Ernie4_5_MoeAttention {
 public:
  Ernie4_5_MoeAttention(const ModelConfig& c, nn::ParameterList& params)
      : kernels_(c.kernels),
        head_dim_(c.head_dim),
        q_proj("self_attn.q_proj", c.hidden_size, c.num_attention_heads * c.head_dim, c.qkv_bias, params),
        k_proj("self_attn.k_proj", c.hidden_size, c.num_key_value_heads * c.head_dim, c.qkv_bias, params),
        v_proj("self_attn.v_proj", c.hidden_size, c.num_key_value_heads * c.head_dim, c.qkv_bias, params),
        o_proj("self_attn.o_proj", c.num_attention_heads * c.head_dim, c.hidden_size, c.o_bias, params) {}

  Tensor forward(const Tensor& hidden_states, const nn::PositionEmbeddings& positions) const {
    ModuleScope scope("self_attn", ModuleKind::kOther);
    const int64_t batch = hidden_states.size(0), seq = hidden_states.size(1);
    auto heads = [&](const Tensor& x) {
      return ops::transpose(ops::view(x, Dims{batch, seq, x.size(-1) / head_dim_, head_dim_}), 1, 2);
    };
    Tensor query_states = heads(q_proj.forward(hidden_states));  // (1, Nh, S, D)
    Tensor key_states = heads(k_proj.forward(hidden_states));    // (1, Nkv, S, D)
    Tensor value_states = heads(v_proj.forward(hidden_states));
    auto [q_embed, k_embed] = ernie_apply_rotary_pos_emb(query_states, key_states, positions.cos, positions.sin);
    query_states = q_embed;
    key_states = k_embed;
    Tensor attn_output = nn::flash_attention_forward(query_states, key_states, value_states, kernels_);  // (1, S, Nh, D)
    attn_output = ops::contiguous(ops::reshape(attn_output, Dims{batch, seq, attn_output.size(2) * attn_output.size(3)}));
    return o_proj.forward(attn_output);
  }

 private:
  nn::KernelProfile kernels_;
  int64_t head_dim_;
  nn::Linear q_proj;  // H -> Nh*D, biased by use_bias
  nn::Linear k_proj;  // H -> Nkv*D
  nn::Linear v_proj;  // H -> Nkv*D
  nn::Linear o_proj;  // Nh*D -> H
};

std::unique_ptr<nn::FeedForward> build_ernie4_5_moe_mlp(const ModelConfig& c, int64_t index,
                                                        nn::ParameterList& params) {
  if (!is_moe_layer(c, index)) return build_dense_mlp(c, index, params);
  nn::Ernie4_5_MoeTopKRouter gate("mlp.gate", c.moe.num_experts, c.moe.num_experts_per_tok, c.hidden_size,
                                  c.moe.norm_min, params);
  return std::make_unique<nn::Ernie4_5_MoeSparseMoeBlock>(
      "mlp", std::move(gate), make_routed_experts(c, index, c.moe.moe_intermediate_size, params), c.hidden_size,
      c.moe.moe_intermediate_size * c.moe.n_shared_experts, c.mlp_bias, c.hidden_act, params);
}

class Ernie4_5_MoeDecoderLayer final : public DecoderLayer {
 public:
  Ernie4_5_MoeDecoderLayer(const ModelConfig& c, int64_t index)
      : hidden_size_(c.hidden_size),
        self_attn(c, parameters_),
        mlp(build_ernie4_5_moe_mlp(c, index, parameters_)),
        input_layernorm("input_layernorm", c.hidden_size, c.rms_norm_eps, parameters_),
        post_attention_layernorm("post_attention_layernorm", c.hidden_size, c.rms_norm_eps, parameters_),
        rotary_emb(c.head_dim, /*halves=*/false, /*fp32=*/true) {}
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
  Ernie4_5_MoeAttention self_attn;
  std::unique_ptr<nn::FeedForward> mlp;  // Ernie4_5_MoeSparseMoeBlock or Ernie4_5_MoeMLP
  nn::LlamaRMSNorm input_layernorm;
  nn::LlamaRMSNorm post_attention_layernorm;
  nn::RotaryEmbedding rotary_emb;  // cos and sin in fp32
};

Result<ModelConfig> read_ernie4_5_moe(const ConfigReader& r);

std::unique_ptr<DecoderLayer> build_ernie4_5_moe_layer(const ModelConfig& config, int64_t index) {
  return std::make_unique<Ernie4_5_MoeDecoderLayer>(config, index);
}

}  // namespace

CENSUS_FAMILY(kErnie4_5_MoeFamily) = {"ernie4_5_moe", read_ernie4_5_moe, build_ernie4_5_moe_layer,
                                      build_llama_final_norm};

namespace {

// Ernie4_5_MoeConfig: use_bias biases every projection (attention, dense MLP, shared experts);
// moe_num_experts (attribute_map: num_experts) experts of moe_intermediate_size, moe_k (alias
// num_experts_per_tok) a token, moe_num_shared_experts shared ones; sparse every moe_layer_interval-th
// layer from moe_layer_start_index to moe_layer_end_index (-1: the last), as is_moe_layer's
// decoder_sparse_step, first_k_dense_replace and the layers after the end listed dense.
Result<ModelConfig> read_ernie4_5_moe(const ConfigReader& r) {
  CENSUS_ASSIGN(ModelConfig c, read_llama_like(r, kErnie4_5_MoeFamily, {103424, 2560, 12288, 28, 20, 4, std::nullopt}));
  CENSUS_ASSIGN(const bool use_bias, r.flag("use_bias", false));
  c.qkv_bias = c.o_bias = c.mlp_bias = use_bias;
  const char* top_k_field = r.has("moe_k") || !r.has("num_experts_per_tok") ? "moe_k" : "num_experts_per_tok";
  CENSUS_ASSIGN(const int64_t top_k, r.size(top_k_field, 6));
  CENSUS_TRY(read_routed_experts(r, "moe_num_experts", "num_experts", 64, top_k, c.moe));
  c.moe.num_experts_per_tok = top_k;
  if (top_k > c.moe.num_experts)
    return refuse(top_k_field, std::to_string(top_k) + " exceeds the " + std::to_string(c.moe.num_experts) +
                                   " experts; a token cannot pick more experts than there are");
  CENSUS_ASSIGN(c.moe.moe_intermediate_size, r.size("moe_intermediate_size", 1536));
  CENSUS_ASSIGN(c.moe.n_shared_experts, r.count("moe_num_shared_experts", 2));
  CENSUS_ASSIGN(c.moe.norm_min, r.positive_number("moe_norm_min", 1e-12));
  CENSUS_ASSIGN(const int64_t start, r.count("moe_layer_start_index", 1));
  CENSUS_ASSIGN(c.moe.decoder_sparse_step, r.size("moe_layer_interval", 1));
  int64_t end = c.num_hidden_layers - 1;
  if (r.has("moe_layer_end_index") && r.json().at("moe_layer_end_index") != -1) {
    CENSUS_ASSIGN(end, r.count("moe_layer_end_index", end));
  }
  c.moe.first_k_dense_replace = std::min(start, c.num_hidden_layers);
  for (int64_t i = end + 1; i < c.num_hidden_layers; ++i) c.moe.mlp_only_layers.push_back(i);
  return c;
}

}  // namespace
}  // namespace census
