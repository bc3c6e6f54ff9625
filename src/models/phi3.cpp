// Phi-3 and Phi-4 (transformers/models/phi3/modeling_phi3.py, Transformers 5; model_type phi3): Llama's
// layer with fused projections, q, k and v from one qkv_proj (sliced along the last dim, so value_states
// stays a view of it) and the gate and up from one gate_up_proj (nn/gate_up_mlp.h); a partial rotary
// where rope_parameters states one (Phi-4-mini rotates 3/4 of each head); resid_pdrop dropout on both
// residual branches (0 in the public checkpoints: no op).
//
// Legend: S = seq_length, H = hidden_size, Nh = heads, Nkv = key/value heads, D = head_dim.
#include "models/llama.h"
#include "models/rope_parameters.h"
#include "nn/gate_up_mlp.h"
#include "ops/ops.h"

namespace census {
namespace {

class Phi3Attention {
 public:
  Phi3Attention(const ModelConfig& c, nn::ParameterList& params)
      : kernels_(c.kernels),
        head_dim_(c.head_dim),
        query_width_(c.num_attention_heads * c.head_dim),
        key_width_(c.num_key_value_heads * c.head_dim),
        o_proj("self_attn.o_proj", c.num_attention_heads * c.head_dim, c.hidden_size, /*bias=*/false, params),
        qkv_proj("self_attn.qkv_proj", c.hidden_size, query_width_ + 2 * key_width_, /*bias=*/false, params) {}

  Tensor forward(const Tensor& hidden_states, const nn::PositionEmbeddings& positions) const {
    ModuleScope scope("self_attn", ModuleKind::kOther);
    const int64_t batch = hidden_states.size(0), seq = hidden_states.size(1);
    Tensor qkv = qkv_proj.forward(hidden_states);  // (1, S, (Nh + 2 Nkv) D)
    const int64_t width = qkv.size(-1);
    auto heads = [&](int64_t start, int64_t end) {
      Tensor part = ops::slice(qkv, -1, start, end);
      return ops::transpose(ops::view(part, Dims{batch, seq, (end - start) / head_dim_, head_dim_}), 1, 2);
    };
    Tensor query_states = heads(0, query_width_);                            // (1, Nh, S, D)
    Tensor key_states = heads(query_width_, query_width_ + key_width_);      // (1, Nkv, S, D)
    Tensor value_states = heads(query_width_ + key_width_, width);           // (1, Nkv, S, D), a view of qkv
    qkv = Tensor();
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
  int64_t query_width_;  // Nh*D
  int64_t key_width_;    // Nkv*D
  nn::Linear o_proj;     // Nh*D -> H
  nn::Linear qkv_proj;   // H -> (Nh + 2 Nkv) D
};

class Phi3DecoderLayer final : public DecoderLayer {
 public:
  Phi3DecoderLayer(const ModelConfig& c)
      : hidden_size_(c.hidden_size),
        resid_pdrop_(c.residual_dropout),
        self_attn(c, parameters_),
        mlp("mlp", c.hidden_size, c.intermediate_size, parameters_, c.hidden_act, "activation_fn"),
        input_layernorm("input_layernorm", c.hidden_size, c.rms_norm_eps, parameters_),
        post_attention_layernorm("post_attention_layernorm", c.hidden_size, c.rms_norm_eps, parameters_),
        rotary_emb(c.rotary_dim) {}
  nn::PositionEmbeddings embed_positions(const Tensor& hidden) const override { return rotary_emb.forward(hidden); }
  int64_t final_norm_parameters() const override { return hidden_size_; }

  Tensor forward(const Tensor& input, const nn::PositionEmbeddings& positions) const override {
    Tensor residual = input;
    Tensor hidden_states = input_layernorm.forward(input);
    hidden_states = self_attn.forward(hidden_states, positions);
    hidden_states = ops::add(residual, dropout("resid_attn_dropout", hidden_states));
    residual = hidden_states;
    hidden_states = post_attention_layernorm.forward(hidden_states);
    hidden_states = mlp.forward(hidden_states);
    return ops::add(residual, dropout("resid_mlp_dropout", hidden_states));
  }

 private:
  // nn.Dropout(resid_pdrop), the module `name`.
  Tensor dropout(const char* name, const Tensor& x) const {
    if (resid_pdrop_ == 0.0) return x;
    ModuleScope scope(name, ModuleKind::kOther);
    return ops::dropout(x, resid_pdrop_);
  }

  int64_t hidden_size_;
  double resid_pdrop_;
  Phi3Attention self_attn;
  nn::GateUpMLP mlp;
  nn::LlamaRMSNorm input_layernorm;
  nn::LlamaRMSNorm post_attention_layernorm;
  nn::RotaryEmbedding rotary_emb;  // over rotary_dim = int(D * partial_rotary_factor)
};

Result<ModelConfig> read_phi3(const ConfigReader& r);

std::unique_ptr<DecoderLayer> build_phi3_layer(const ModelConfig& config, int64_t /*index*/) {
  return std::make_unique<Phi3DecoderLayer>(config);
}

}  // namespace

CENSUS_FAMILY(kPhi3Family) = {.model_type = "phi3", .read = read_phi3, .build_layer = build_phi3_layer, .build_final_norm = build_llama_final_norm, .liger_patches = true,
                              .peft_lora = true, .autocast = true};

namespace {

// Phi3Config: Phi-3-mini's sizes by default, no biases, rms_norm_eps 1e-5, head_dim hidden_size /
// num_attention_heads (Phi3Attention reads a stated head_dim), partial_rotary_factor 1 by default.
Result<ModelConfig> read_phi3(const ConfigReader& r) {
  CENSUS_ASSIGN(ModelConfig c, read_llama_like(r, kPhi3Family, {32064, 3072, 8192, 32, 32, std::nullopt, std::nullopt}));
  CENSUS_ASSIGN(c.rms_norm_eps, r.positive_number("rms_norm_eps", 1e-5));
  CENSUS_ASSIGN(c.residual_dropout, r.probability("resid_pdrop", 0.0));
  CENSUS_TRY(read_partial_rotary_dim(r, c, 1.0));
  return c;
}

}  // namespace
}  // namespace census
