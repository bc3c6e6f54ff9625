// OLMo 3 (transformers/models/olmo3/modeling_olmo3.py, Transformers 5): a post-norm layer, each
// branch's output normed before its residual add (no input_layernorm), with q and k RMSNorms over
// the whole projection (all heads at once, before the split into heads); three sliding layers to one
// full by default, whose window changes no shape the census counts. Its norms apply the weight to the
// fp32 states before the cast (GPT-OSS's norm, nn/rms_norm.h), and so does the model's final norm.
//
// Legend: S = seq_length, H = hidden_size, Nh = heads, Nkv = key/value heads, D = head_dim.
#include "models/llama.h"
#include "nn/attention_kernel.h"
#include "ops/ops.h"

namespace census {
namespace {

// Olmo3RotaryEmbedding: Llama's, except that cos and sin stay fp32 (its forward casts them to no
// dtype), so each layer's rotary products run, and keep cos and sin, in fp32.
class Olmo3RotaryEmbedding {
 public:
  explicit Olmo3RotaryEmbedding(int64_t head_dim) : inv_freq_(make_tensor(Dims{head_dim / 2}, DType::kFloat32)) {}
  nn::PositionEmbeddings forward(const Tensor& hidden) const {
    nn::PositionEmbeddings out;
    out.position_ids = ops::unsqueeze(ops::arange(hidden.size(1)), 0);
    NoGradGuard no_grad;
    // inv_freq[None, :, None] @ position_ids[:, None, :].float(), transposed: (1, S, D/2) fp32.
    Tensor inv_freq_expanded = ops::unsqueeze(ops::unsqueeze(inv_freq_, 0), 2);
    Tensor position_ids_expanded = ops::to(ops::unsqueeze(out.position_ids, 1), DType::kFloat32);
    Tensor freqs = ops::transpose(ops::mul(inv_freq_expanded, position_ids_expanded), 1, 2);
    Tensor emb = ops::cat({freqs, freqs}, -1);  // (1, S, D) fp32
    const double attention_scaling = 1.0;       // scales values only, never shapes
    out.cos = ops::mul(ops::cos(emb), attention_scaling);
    out.sin = ops::mul(ops::sin(emb), attention_scaling);
    return out;
  }

 private:
  Tensor inv_freq_;  // (D/2) fp32
};

class Olmo3Attention {
 public:
  Olmo3Attention(const ModelConfig& c, nn::ParameterList& params)
      : kernels_(c.kernels),
        head_dim_(c.head_dim),
        q_proj("self_attn.q_proj", c.hidden_size, c.num_attention_heads * c.head_dim, c.qkv_bias, params),
        k_proj("self_attn.k_proj", c.hidden_size, c.num_key_value_heads * c.head_dim, c.qkv_bias, params),
        v_proj("self_attn.v_proj", c.hidden_size, c.num_key_value_heads * c.head_dim, c.qkv_bias, params),
        o_proj("self_attn.o_proj", c.num_attention_heads * c.head_dim, c.hidden_size, c.o_bias, params),
        q_norm("self_attn.q_norm", c.num_attention_heads * c.head_dim, c.rms_norm_eps, params),
        k_norm("self_attn.k_norm", c.num_key_value_heads * c.head_dim, c.rms_norm_eps, params) {}

  Tensor forward(const Tensor& hidden_states, const nn::PositionEmbeddings& positions) const {
    ModuleScope scope("self_attn", ModuleKind::kOther);
    const int64_t batch = hidden_states.size(0), seq = hidden_states.size(1);
    Tensor query_states = q_norm.forward(q_proj.forward(hidden_states));  // (1, S, Nh*D)
    Tensor key_states = k_norm.forward(k_proj.forward(hidden_states));    // (1, S, Nkv*D)
    Tensor value_states = v_proj.forward(hidden_states);
    auto heads = [&](const Tensor& states) {
      return ops::transpose(ops::view(states, Dims{batch, seq, states.size(-1) / head_dim_, head_dim_}), 1, 2);
    };
    query_states = heads(query_states);  // (1, Nh, S, D)
    key_states = heads(key_states);      // (1, Nkv, S, D)
    value_states = heads(value_states);
    // Rotated in fp32 (cos and sin are), then cast back to q's and k's dtype.
    auto [q_embed, k_embed] = nn::apply_rotary_pos_emb(query_states, key_states, positions.cos, positions.sin);
    query_states = ops::to(q_embed, query_states.dtype());
    key_states = ops::to(k_embed, key_states.dtype());
    Tensor attn_output = nn::flash_attention_forward(query_states, key_states, value_states, kernels_);  // (1, S, Nh, D)
    attn_output = ops::contiguous(ops::reshape(attn_output, Dims{batch, seq, attn_output.size(2) * attn_output.size(3)}));
    return o_proj.forward(attn_output);
  }

 private:
  nn::KernelProfile kernels_;
  int64_t head_dim_;
  nn::Linear q_proj;          // H -> Nh*D
  nn::Linear k_proj;          // H -> Nkv*D
  nn::Linear v_proj;          // H -> Nkv*D
  nn::Linear o_proj;          // Nh*D -> H
  nn::GptOssRMSNorm q_norm;   // over Nh*D
  nn::GptOssRMSNorm k_norm;   // over Nkv*D
};

class Olmo3DecoderLayer final : public DecoderLayer {
 public:
  explicit Olmo3DecoderLayer(const ModelConfig& c)
      : hidden_size_(c.hidden_size),
        self_attn(c, parameters_),
        mlp("mlp", c.hidden_size, c.intermediate_size, /*bias=*/false, parameters_, c.hidden_act),
        post_attention_layernorm("post_attention_layernorm", c.hidden_size, c.rms_norm_eps, parameters_),
        post_feedforward_layernorm("post_feedforward_layernorm", c.hidden_size, c.rms_norm_eps, parameters_),
        rotary_emb(c.head_dim) {}
  nn::PositionEmbeddings embed_positions(const Tensor& hidden) const override { return rotary_emb.forward(hidden); }
  // The model's final norm (model.norm), of the class of the layer's norms.
  int64_t final_norm_parameters() const override { return hidden_size_; }

  Tensor forward(const Tensor& input, const nn::PositionEmbeddings& positions) const override {
    Tensor residual = input;
    Tensor hidden_states = self_attn.forward(input, positions);
    hidden_states = post_attention_layernorm.forward(hidden_states);
    hidden_states = ops::add(residual, hidden_states);
    residual = hidden_states;
    hidden_states = mlp.forward(hidden_states);
    hidden_states = post_feedforward_layernorm.forward(hidden_states);
    return ops::add(residual, hidden_states);
  }

 private:
  int64_t hidden_size_;
  Olmo3Attention self_attn;
  nn::GatedMLP mlp;
  nn::GptOssRMSNorm post_attention_layernorm;
  nn::GptOssRMSNorm post_feedforward_layernorm;
  Olmo3RotaryEmbedding rotary_emb;  // the model's, held here so one layer can run alone
};

Result<ModelConfig> read_olmo3(const ConfigReader& r);

std::unique_ptr<DecoderLayer> build_olmo3_layer(const ModelConfig& config, int64_t /*index*/) {
  return std::make_unique<Olmo3DecoderLayer>(config);
}

// model.norm: an Olmo3RMSNorm. (A post-norm layer has no input_layernorm to take the class from.)
std::unique_ptr<nn::Norm> build_olmo3_final_norm(const ModelConfig& config, nn::ParameterList& params) {
  return std::make_unique<nn::GptOssRMSNorm>("norm", config.hidden_size, config.rms_norm_eps, params);
}

}  // namespace

CENSUS_FAMILY(kOlmo3Family) = {
    .model_type = "olmo3",
    .read = read_olmo3,
    .build_layer = build_olmo3_layer,
    .build_final_norm = build_olmo3_final_norm,
    .rotary_per_layer_type = true,
    .liger_patches = true,
    .peft_lora = true, .autocast = true,
};

namespace {

// Olmo3Config: OLMo-3-7B's sizes by default, rms_norm_eps 1e-5, attention_bias for q, k, v and o;
// layer_types as stated, else every fourth layer full and the rest sliding.
Result<ModelConfig> read_olmo3(const ConfigReader& r) {
  CENSUS_ASSIGN(ModelConfig c, read_llama_like(r, kOlmo3Family, {50304, 4096, 11008, 32, 32, std::nullopt, std::nullopt}));
  CENSUS_ASSIGN(c.rms_norm_eps, r.positive_number("rms_norm_eps", 1e-5));
  CENSUS_TRY(read_attention_bias(r, c));
  c.layer_types.clear();
  for (int64_t i = 0; i < c.num_hidden_layers; ++i)
    c.layer_types.push_back((i + 1) % 4 ? "sliding_attention" : "full_attention");
  CENSUS_TRY(read_stated_layer_types(r, c));
  return c;
}

}  // namespace
}  // namespace census
