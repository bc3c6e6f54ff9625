// MiniMax-M2 (transformers/models/minimax_m2/modeling_minimax_m2.py, Transformers 5): Llama's attention
// with q/k RMSNorm over the whole projection width (all heads at once, before the heads are split), a
// partial rotary where the config states one, and MiniMaxM2SparseMoeBlock on every layer (the
// sigmoid router with a correction bias, experts of intermediate_size; nn/minimax_moe.h).
//
// Tensor parallelism: the norms' statistic is a mean over all Nh*D (resp. Nkv*D) channels, which a
// rank holding Nh/t heads does not have without an all-reduce. The census prices a rank as the
// reference builds it, a model of Nh/t heads whose q_norm and k_norm are Nh/t*D and Nkv/t*D wide
// (each rank normalizes its own heads' slice); `census tp-config` states those widths.
//
// Legend: S = seq_length, H = hidden_size, Nh = heads, Nkv = key/value heads, D = head_dim, R = rotary_dim.
#include "models/llama.h"
#include "models/moe_layers.h"
#include "nn/minimax_moe.h"
#include "nn/pre_norm_layer.h"
#include "ops/ops.h"

namespace census {
namespace {

class MiniMaxM2Attention {
 public:
  MiniMaxM2Attention(const ModelConfig& c, nn::ParameterList& params)
      : kernels_(c.kernels),
        head_dim_(c.head_dim),
        q_proj("self_attn.q_proj", c.hidden_size, c.num_attention_heads * c.head_dim, false, params),
        k_proj("self_attn.k_proj", c.hidden_size, c.num_key_value_heads * c.head_dim, false, params),
        v_proj("self_attn.v_proj", c.hidden_size, c.num_key_value_heads * c.head_dim, false, params),
        o_proj("self_attn.o_proj", c.num_attention_heads * c.head_dim, c.hidden_size, false, params),
        q_norm("self_attn.q_norm", c.num_attention_heads * c.head_dim, c.rms_norm_eps, params),
        k_norm("self_attn.k_norm", c.num_key_value_heads * c.head_dim, c.rms_norm_eps, params) {}

  Tensor forward(const Tensor& hidden_states, const nn::PositionEmbeddings& positions) const {
    ModuleScope scope("self_attn", ModuleKind::kOther);
    const int64_t batch = hidden_states.size(0), seq = hidden_states.size(1);
    Tensor query_states = q_norm.forward(q_proj.forward(hidden_states));  // (1, S, Nh*D), normed as a whole
    Tensor key_states = k_norm.forward(k_proj.forward(hidden_states));    // (1, S, Nkv*D)
    Tensor value_states = v_proj.forward(hidden_states);
    auto heads = [&](const Tensor& x) {
      return ops::transpose(ops::view(x, Dims{batch, seq, x.size(-1) / head_dim_, head_dim_}), 1, 2);
    };
    query_states = heads(query_states);  // (1, Nh, S, D)
    key_states = heads(key_states);      // (1, Nkv, S, D)
    value_states = heads(value_states);
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
  nn::Linear q_proj;  // H -> Nh*D
  nn::Linear k_proj;  // H -> Nkv*D
  nn::Linear v_proj;  // H -> Nkv*D
  nn::Linear o_proj;  // Nh*D -> H
  nn::LlamaRMSNorm q_norm;  // over Nh*D
  nn::LlamaRMSNorm k_norm;  // over Nkv*D
};

class MiniMaxM2DecoderLayer final : public DecoderLayer {
 public:
  MiniMaxM2DecoderLayer(const ModelConfig& c, int64_t index)
      : hidden_size_(c.hidden_size),
        self_attn(c, parameters_),
        mlp(build_mlp(c, index)),
        input_layernorm("input_layernorm", c.hidden_size, c.rms_norm_eps, parameters_),
        post_attention_layernorm("post_attention_layernorm", c.hidden_size, c.rms_norm_eps, parameters_),
        rotary_emb(c.rotary_dim > 0 ? c.rotary_dim : c.head_dim) {}
  nn::PositionEmbeddings embed_positions(const Tensor& hidden) const override { return rotary_emb.forward(hidden); }
  Tensor forward(const Tensor& input, const nn::PositionEmbeddings& positions) const override {
    return nn::pre_norm_layer_forward(
        input, input_layernorm, [&](const Tensor& normed) { return self_attn.forward(normed, positions); },
        post_attention_layernorm, *mlp);
  }
  int64_t final_norm_parameters() const override { return hidden_size_; }

  std::vector<Tensor> registered_buffers() const override { return mlp->buffers(); }

 private:
  // MiniMaxM2SparseMoeBlock: gate, experts (intermediate_size wide), then the bias buffer.
  std::unique_ptr<nn::FeedForward> build_mlp(const ModelConfig& c, int64_t index) {
    nn::MiniMaxM2TopKRouter gate("mlp.gate", c.moe.num_experts, c.moe.num_experts_per_tok, c.hidden_size, parameters_);
    return std::make_unique<nn::MiniMaxM2SparseMoeBlock>(
        "mlp", std::move(gate), make_routed_experts(c, index, c.moe.moe_intermediate_size, parameters_),
        c.moe.num_experts);
  }

  int64_t hidden_size_;
  MiniMaxM2Attention self_attn;
  std::unique_ptr<nn::FeedForward> mlp;
  nn::LlamaRMSNorm input_layernorm;
  nn::LlamaRMSNorm post_attention_layernorm;
  nn::RotaryEmbedding rotary_emb;  // R wide
};

Result<ModelConfig> read_minimax_m2(const ConfigReader& r);

std::unique_ptr<DecoderLayer> build_minimax_m2_layer(const ModelConfig& config, int64_t index) {
  return std::make_unique<MiniMaxM2DecoderLayer>(config, index);
}

}  // namespace

CENSUS_FAMILY(kMiniMaxM2Family) = {"minimax_m2", read_minimax_m2, build_minimax_m2_layer, build_llama_final_norm};

namespace {

// MiniMaxM2Config: head_dim 128; no attention biases; partial_rotary_factor 1 unless stated (in
// rope_parameters or at the top level); num_local_experts (attribute_map: num_experts) experts of
// intermediate_size on every layer, top 8. The experts' width is intermediate_size, which tensor
// parallelism divides as it does a dense MLP's.
Result<ModelConfig> read_minimax_m2(const ConfigReader& r) {
  CENSUS_ASSIGN(ModelConfig c, read_llama_like(r, kMiniMaxM2Family, {200064, 3072, 1536, 62, 48, 8, 128}));
  CENSUS_TRY(read_rotary_dim(r, c, 1.0));
  CENSUS_TRY(read_routed_experts(r, "num_local_experts", "num_experts", 256, 8, c.moe));
  c.moe.moe_intermediate_size = c.intermediate_size;
  c.qk_norm_over_heads = true;
  return c;
}

}  // namespace
}  // namespace census
