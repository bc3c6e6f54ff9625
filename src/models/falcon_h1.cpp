// Falcon-H1 (transformers/models/falcon_h1/modeling_falcon_h1.py, Transformers 5): FalconH1DecoderLayer
// runs a Mamba-2 mixer ("mamba") and an attention ("self_attn") side by side on the same normed input,
// adds their outputs, then a gated MLP ("feed_forward"), with the μP multipliers: the mixer's input
// (ssm_in_multiplier) and projection (the mup_vector buffer the model registers on each mixer) and
// output (ssm_out_multiplier), the attention's input and output and its keys (key_multiplier), the
// MLP's gate and output (mlp_multipliers). Every layer is of one kind, parallel_hybrid.
//
// Legend: S = seq_length, H = hidden_size, Nh = heads, Nkv = KV heads, D = head_dim, I = widths.
#include <optional>

#include "models/causal_lm.h"
#include "models/llama.h"
#include "nn/attention_kernel.h"
#include "nn/linear.h"
#include "nn/mamba2_mixer.h"
#include "nn/rms_norm.h"
#include "nn/rotary.h"
#include "ops/ops.h"

namespace census {
namespace {

// FalconH1Attention: Llama's, its keys scaled by key_multiplier (a multiply by a Python number, no
// save) before the rotary.
class FalconH1Attention {
 public:
  FalconH1Attention(const ModelConfig& c, nn::ParameterList& params)
      : kernels_(c.kernels), head_dim_(c.head_dim), key_multiplier_(c.falcon.key_multiplier),
        q_proj("self_attn.q_proj", c.hidden_size, c.num_attention_heads * c.head_dim, c.qkv_bias, params),
        k_proj("self_attn.k_proj", c.hidden_size, c.num_key_value_heads * c.head_dim, c.qkv_bias, params),
        v_proj("self_attn.v_proj", c.hidden_size, c.num_key_value_heads * c.head_dim, c.qkv_bias, params),
        o_proj("self_attn.o_proj", c.num_attention_heads * c.head_dim, c.hidden_size, c.o_bias, params) {}
  Tensor forward(const Tensor& hidden_states, const nn::PositionEmbeddings& positions) const {
    ModuleScope scope("self_attn", ModuleKind::kOther);
    const int64_t batch = hidden_states.size(0), seq = hidden_states.size(1);
    auto heads = [&](const Tensor& projected) {
      return ops::transpose(ops::view(projected, Dims{batch, seq, projected.size(-1) / head_dim_, head_dim_}), 1, 2);
    };
    Tensor query_states = heads(q_proj.forward(hidden_states));                                  // (1, Nh, S, D)
    Tensor key_states = ops::mul_number(heads(k_proj.forward(hidden_states)), key_multiplier_);  // (1, Nkv, S, D)
    Tensor value_states = heads(v_proj.forward(hidden_states));
    auto [q_embed, k_embed] = nn::apply_rotary_pos_emb(query_states, key_states, positions.cos, positions.sin);
    query_states = q_embed;
    key_states = k_embed;
    Tensor attn_output = nn::flash_attention_forward(query_states, key_states, value_states, kernels_);  // (1, S, Nh, D)
    attn_output = ops::contiguous(ops::reshape(attn_output, Dims{batch, seq, attn_output.size(2) * attn_output.size(3)}));
    return o_proj.forward(attn_output);
  }

 private:
  nn::KernelProfile kernels_;
  int64_t head_dim_;
  double key_multiplier_;
  nn::Linear q_proj;
  nn::Linear k_proj;
  nn::Linear v_proj;
  nn::Linear o_proj;
};

// FalconH1MLP: y = up_proj(x) * act_fn(gate_proj(x) * gate_multiplier); down_proj(y) * down_multiplier.
class FalconH1MLP {
 public:
  FalconH1MLP(const ModelConfig& c, nn::ParameterList& params)
      : gate_multiplier_(c.falcon.gate_multiplier), down_multiplier_(c.falcon.down_multiplier),
        gate_proj("feed_forward.gate_proj", c.hidden_size, c.intermediate_size, c.mlp_bias, params),
        up_proj("feed_forward.up_proj", c.hidden_size, c.intermediate_size, c.mlp_bias, params),
        down_proj("feed_forward.down_proj", c.intermediate_size, c.hidden_size, c.mlp_bias, params),
        act_fn("feed_forward.act_fn", c.hidden_act) {}
  Tensor forward(const Tensor& x) const {
    ModuleScope scope("feed_forward", ModuleKind::kOther);
    Tensor up = up_proj.forward(x);
    Tensor y = ops::mul(up, act_fn.forward(ops::mul_number(gate_proj.forward(x), gate_multiplier_)));
    up = Tensor();
    return ops::mul_number(down_proj.forward(y), down_multiplier_);
  }

 private:
  double gate_multiplier_;
  double down_multiplier_;
  nn::Linear gate_proj;
  nn::Linear up_proj;
  nn::Linear down_proj;
  nn::Activation act_fn;
};

}  // namespace

class FalconH1DecoderLayer final : public DecoderLayer {
 public:
  // Registered as the layer registers them: feed_forward, mamba, self_attn, then the two norms.
  explicit FalconH1DecoderLayer(const ModelConfig& c)
      : hidden_size_(c.hidden_size), falcon_(c.falcon), feed_forward(c, parameters_),
        mamba("mamba", *c.mamba, parameters_), self_attn(c, parameters_),
        input_layernorm("input_layernorm", c.hidden_size, c.rms_norm_eps, parameters_),
        pre_ff_layernorm("pre_ff_layernorm", c.hidden_size, c.rms_norm_eps, parameters_), rotary_emb(c.head_dim) {}
  nn::PositionEmbeddings embed_positions(const Tensor& hidden) const override { return rotary_emb.forward(hidden); }
  Tensor forward(const Tensor& input, const nn::PositionEmbeddings& positions) const override {
    Tensor residual = input;
    Tensor hidden_states = input_layernorm.forward(input);
    Tensor mamba_hidden_states = mamba.forward(hidden_states);
    mamba_hidden_states = ops::mul_number(mamba_hidden_states, falcon_.ssm_out_multiplier);
    Tensor attention_hidden_states =
        self_attn.forward(ops::mul_number(hidden_states, falcon_.attention_in_multiplier), positions);
    attention_hidden_states = ops::mul_number(attention_hidden_states, falcon_.attention_out_multiplier);
    hidden_states = ops::add(mamba_hidden_states, attention_hidden_states);
    mamba_hidden_states = attention_hidden_states = Tensor();
    hidden_states = ops::add(residual, hidden_states);
    residual = hidden_states;
    hidden_states = pre_ff_layernorm.forward(hidden_states);
    hidden_states = feed_forward.forward(hidden_states);
    return ops::add(residual, hidden_states);
  }
  int64_t final_norm_parameters() const override { return hidden_size_; }
  std::vector<Tensor> buffers() const override { return {mamba.mup_vector()}; }

 private:
  int64_t hidden_size_;
  FalconMultipliers falcon_;
  FalconH1MLP feed_forward;
  nn::Mamba2Mixer mamba;
  FalconH1Attention self_attn;
  nn::LlamaRMSNorm input_layernorm;  // FalconH1RMSNorm: Llama's
  nn::LlamaRMSNorm pre_ff_layernorm;
  nn::RotaryEmbedding rotary_emb;  // the model's (FalconH1RotaryEmbedding, default rope)
};

namespace {

Result<ModelConfig> read_falcon_h1(const ConfigReader& r);

std::unique_ptr<DecoderLayer> build_falcon_h1_layer(const ModelConfig& config, int64_t /*index*/) {
  return std::make_unique<FalconH1DecoderLayer>(config);
}

// FalconH1Model and FalconH1ForCausalLM around the layers: the embeddings times embedding_multiplier
// (where the model embeds the ids itself), the logits times lm_head_multiplier.
class FalconH1ForCausalLM final : public CausalLM {
 public:
  using CausalLM::CausalLM;

 protected:
  Tensor embed(const Tensor& input_ids) const override {
    return ops::mul_number(CausalLM::embed(input_ids), config_.embedding_multiplier);
  }
  Tensor logits(const Tensor& hidden_states) const override {
    return ops::mul_number(CausalLM::logits(hidden_states), config_.lm_head_multiplier);
  }
};

std::unique_ptr<CausalLM> build_falcon_h1_causal_lm(const ModelConfig& config, const ModelConfig& layer_config,
                                                    ModelChunk chunk) {
  return make_causal_lm<FalconH1ForCausalLM>(config, layer_config, chunk);
}

}  // namespace

CENSUS_FAMILY(kFalconH1Family) = {
    .model_type = "falcon_h1",
    .read = read_falcon_h1,
    .build_layer = build_falcon_h1_layer,
    .build_final_norm = build_llama_final_norm,
    .build_causal_lm = build_falcon_h1_causal_lm,
};

namespace {

// A list of `count` numbers (mlp_multipliers, ssm_multipliers), or `fallback` where absent.
Result<std::vector<double>> read_numbers(const ConfigReader& r, const char* name, size_t count, double fallback) {
  std::vector<double> out(count, fallback);
  if (!r.has(name)) return out;
  const nlohmann::json& value = r.json().at(name);
  if (!value.is_array() || value.size() != count)
    return refuse(name, "must list " + std::to_string(count) + " numbers; fix the config");
  for (size_t i = 0; i < count; ++i) {
    if (!value.at(i).is_number()) return refuse(name, "must list " + std::to_string(count) + " numbers; fix the config");
    out[i] = value.at(i).get<double>();
  }
  return out;
}

// The Mamba-2 mixer as FalconH1Mixer sizes it: mamba_d_ssm wide (mamba_expand * hidden_size where
// null), mamba_d_head "auto" = that width / mamba_n_heads, dt clamped from below by
// time_step_limit[0], out_proj biased by projectors_bias; gated without a norm unless mamba_rms_norm.
Result<nn::Mamba2Sizes> read_falcon_mamba(const ConfigReader& r, const ModelConfig& c) {
  nn::Mamba2Sizes m{};
  m.hidden_size = c.hidden_size;
  CENSUS_ASSIGN(m.num_heads, r.size("mamba_n_heads", 128));
  CENSUS_ASSIGN(m.n_groups, r.size("mamba_n_groups", 1));
  CENSUS_ASSIGN(m.ssm_state_size, r.size("mamba_d_state", 256));
  CENSUS_ASSIGN(m.conv_kernel, r.size("mamba_d_conv", 4));
  CENSUS_ASSIGN(const int64_t expand, r.size("mamba_expand", 2));
  CENSUS_ASSIGN(m.chunk_size, r.size("mamba_chunk_size", 256));
  CENSUS_ASSIGN(m.use_conv_bias, r.flag("mamba_conv_bias", true));
  CENSUS_ASSIGN(m.use_bias, r.flag("mamba_proj_bias", false));
  CENSUS_ASSIGN(m.out_proj_bias, r.flag("projectors_bias", false));
  const bool stated_width = !r.json().contains("mamba_d_ssm") || !r.json().at("mamba_d_ssm").is_null();
  if (stated_width) {
    CENSUS_ASSIGN(m.intermediate_size, r.size("mamba_d_ssm", 1024));
  } else {
    m.intermediate_size = expand * c.hidden_size;
  }
  const bool auto_head = !r.has("mamba_d_head") || (r.json().at("mamba_d_head").is_string() &&
                                                    r.json().at("mamba_d_head").get<std::string>() == "auto");
  if (auto_head) {
    m.head_dim = m.intermediate_size / m.num_heads;
  } else {
    CENSUS_ASSIGN(m.head_dim, r.size("mamba_d_head", 1));
  }
  if (m.num_heads * m.head_dim != m.intermediate_size || m.num_heads % m.n_groups != 0)
    return refuse("mamba_n_heads", std::to_string(m.num_heads) + " heads of " + std::to_string(m.head_dim) +
                                       " in " + std::to_string(m.n_groups) + " groups do not make the mixer's width " +
                                       std::to_string(m.intermediate_size) + " (mamba_d_ssm); fix the config");
  CENSUS_ASSIGN(m.rms_norm, r.flag("mamba_rms_norm", false));
  if (m.rms_norm)
    return refuse("mamba_rms_norm", "true is not priced yet (FalconH1RMSNormGated); the shipped Falcon-H1 configs have false");
  m.time_step_min = 0.0;
  if (r.has("time_step_limit")) {
    const nlohmann::json& limit = r.json().at("time_step_limit");
    if (!limit.is_array() || limit.size() != 2 || !limit.at(0).is_number())
      return refuse("time_step_limit", "must be two numbers [min, max]; fix the config");
    m.time_step_min = limit.at(0).get<double>();
  }
  m.mup = true;
  CENSUS_ASSIGN(m.ssm_in_multiplier, r.positive_number("ssm_in_multiplier", 1.0));
  CENSUS_TRY(read_numbers(r, "ssm_multipliers", 5, 1.0));
  m.norm_eps = c.rms_norm_eps;
  return m;
}

// FalconH1Config: hidden 4096, 32 heads, 8 KV heads, MLP 14336, a Mamba-2 of 128 heads, 1024 wide,
// state 256, on every layer beside the attention; rms_norm_eps 1e-5.
Result<ModelConfig> read_falcon_h1(const ConfigReader& r) {
  CENSUS_ASSIGN(ModelConfig c, read_llama_like(r, kFalconH1Family, {128000, 4096, 14336, 32, 32, 8, std::nullopt}));
  CENSUS_ASSIGN(c.rms_norm_eps, r.positive_number("rms_norm_eps", 1e-5));
  CENSUS_TRY(read_attention_bias(r, c));
  CENSUS_ASSIGN(c.mlp_bias, r.flag("mlp_bias", false));
  CENSUS_ASSIGN(c.embedding_multiplier, r.positive_number("embedding_multiplier", 1.0));
  CENSUS_ASSIGN(c.lm_head_multiplier, r.positive_number("lm_head_multiplier", 1.0));
  CENSUS_ASSIGN(c.falcon.key_multiplier, r.positive_number("key_multiplier", 1.0));
  CENSUS_ASSIGN(c.falcon.attention_in_multiplier, r.positive_number("attention_in_multiplier", 1.0));
  CENSUS_ASSIGN(c.falcon.attention_out_multiplier, r.positive_number("attention_out_multiplier", 1.0));
  CENSUS_ASSIGN(c.falcon.ssm_out_multiplier, r.positive_number("ssm_out_multiplier", 1.0));
  CENSUS_ASSIGN(const std::vector<double> mlp, read_numbers(r, "mlp_multipliers", 2, 1.0));
  c.falcon.gate_multiplier = mlp[0];
  c.falcon.down_multiplier = mlp[1];
  CENSUS_ASSIGN(c.mamba, read_falcon_mamba(r, c));
  c.kinds_from_layer_types = true;
  c.layer_types.assign(static_cast<size_t>(c.num_hidden_layers), "parallel_hybrid");
  return c;
}

}  // namespace
}  // namespace census
