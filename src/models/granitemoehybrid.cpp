// Granite-4.0-H (transformers/models/granitemoehybrid/modeling_granitemoehybrid.py, Transformers 5):
// GraniteMoeHybridDecoderLayer, a Mamba-2 mixer ("mamba") or an attention ("self_attn") as
// layer_types says, then a MoE ("block_sparse_moe": router, experts) and a shared gated MLP
// ("shared_mlp": input_linear, output_linear) on the same input, added; each residual branch scaled
// by residual_multiplier.
//
// The attention applies rotary as the reference's method runs every Granite attention layer, with
// the family's rotary class's cos and sin, whatever position_embedding_type says (the model itself
// passes none unless it is "rope"; see the README's differences).
//
// Legend: S = seq_length, H = hidden_size, E = experts, K = experts per token, I = widths.
#include <optional>

#include "models/causal_lm.h"
#include "models/llama.h"
#include "models/moe_layers.h"
#include "nn/mamba2_mixer.h"
#include "nn/moe.h"
#include "nn/rms_norm.h"
#include "ops/ops.h"
#include "util/escape.h"

namespace census {
namespace {

// GraniteMoeHybridTopKRouter: logits = F.linear(x, W).float(); top-k of the fp32 logits; softmax over
// the K chosen, cast back to x's dtype.
//   saves: x (T, H) by the linear; the indices by topk; the softmax's (T, K) fp32 result.
class GraniteMoeHybridTopKRouter {
 public:
  GraniteMoeHybridTopKRouter(std::string path, int64_t num_experts, int64_t top_k, int64_t hidden_size,
                             nn::ParameterList& params)
      : path_(std::move(path)), top_k_(top_k),
        weight_(nn::register_parameter(params, path_, "weight", Dims{num_experts, hidden_size})) {}
  nn::Routing forward(const Tensor& hidden_states) const {
    ModuleScope scope(path_, ModuleKind::kOther);
    Tensor router_logits = ops::to(ops::linear(hidden_states, weight_), DType::kFloat32);  // (T, E) fp32
    auto [top_k_logits, top_k_index] = ops::topk(router_logits, top_k_);
    Tensor top_k_weights = ops::to(ops::softmax(top_k_logits, -1, DType::kFloat32), hidden_states.dtype());
    return {std::move(router_logits), std::move(top_k_weights), std::move(top_k_index)};
  }

 private:
  std::string path_;
  int64_t top_k_;
  Tensor weight_;  // (E, H)
};

// GraniteMoeHybridMoE: the router and the experts on the (T, H) rows, back to (B, S, H).
class GraniteMoeHybridMoE {
 public:
  GraniteMoeHybridMoE(const ModelConfig& c, nn::ParameterList& params)
      : router("block_sparse_moe.router", c.moe.num_experts, c.moe.num_experts_per_tok, c.hidden_size, params),
        experts("block_sparse_moe.experts", c.moe.num_experts / c.moe.expert_parallel, c.hidden_size, c.intermediate_size, c.hidden_act,
                c.moe.experts_implementation, params) {}
  Tensor forward(const Tensor& layer_input) const {
    ModuleScope scope("block_sparse_moe", ModuleKind::kOther);
    const Tensor hidden_states = ops::reshape(layer_input, Dims{layer_input.numel() / layer_input.size(-1), layer_input.size(-1)});
    nn::Routing routed = router.forward(hidden_states);
    Tensor layer_output = experts.forward(hidden_states, routed.indices, routed.weights);
    return ops::view(layer_output, layer_input.sizes());
  }

 private:
  GraniteMoeHybridTopKRouter router;
  nn::Experts experts;
};

// GraniteMoeHybridMLP, the shared MLP: input_linear (H -> 2I), chunked in two, act(first) * second,
// output_linear.
class GraniteMoeHybridMLP {
 public:
  GraniteMoeHybridMLP(const ModelConfig& c, nn::ParameterList& params)
      : input_linear("shared_mlp.input_linear", c.hidden_size, 2 * c.moe.moe_shared_expert_intermediate_size, false, params),
        output_linear("shared_mlp.output_linear", c.moe.moe_shared_expert_intermediate_size, c.hidden_size, false, params),
        activation("shared_mlp.activation", c.hidden_act) {}
  Tensor forward(const Tensor& input) const {
    ModuleScope scope("shared_mlp", ModuleKind::kOther);
    Tensor hidden_states = input_linear.forward(input);
    const std::vector<Tensor> chunked_hidden_states = ops::chunk(hidden_states, 2, -1);
    hidden_states = ops::mul(activation.forward(chunked_hidden_states[0]), chunked_hidden_states[1]);
    return output_linear.forward(hidden_states);
  }

 private:
  nn::Linear input_linear;
  nn::Linear output_linear;
  nn::Activation activation;
};

}  // namespace

class GraniteMoeHybridDecoderLayer final : public DecoderLayer {
 public:
  GraniteMoeHybridDecoderLayer(const ModelConfig& c, int64_t index)
      : hidden_size_(c.hidden_size), residual_multiplier_(c.residual_multiplier),
        input_layernorm("input_layernorm", c.hidden_size, c.rms_norm_eps, parameters_),
        post_attention_layernorm("post_attention_layernorm", c.hidden_size, c.rms_norm_eps, parameters_),
        rotary_emb(c.head_dim) {
    // Registered as the layer registers them: the norms, the MoE, the shared MLP, then the mixer.
    if (c.moe.num_experts > 0) block_sparse_moe.emplace(c, parameters_);
    shared_mlp.emplace(c, parameters_);
    if (c.layer_types[static_cast<size_t>(index)] == "mamba") mamba.emplace("mamba", *c.mamba, parameters_);
    else self_attn.emplace(c, parameters_);
  }
  nn::PositionEmbeddings embed_positions(const Tensor& hidden) const override { return rotary_emb.forward(hidden); }
  Tensor forward(const Tensor& input, const nn::PositionEmbeddings& positions) const override {
    Tensor residual = input;
    Tensor hidden_states = input_layernorm.forward(input);
    hidden_states = mamba ? mamba->forward(hidden_states) : self_attn->forward(hidden_states, positions);
    hidden_states = ops::add(residual, ops::mul_number(hidden_states, residual_multiplier_));
    residual = hidden_states;
    hidden_states = post_attention_layernorm.forward(hidden_states);
    if (block_sparse_moe) {
      Tensor moe_hidden_states = block_sparse_moe->forward(hidden_states);
      hidden_states = ops::add(moe_hidden_states, shared_mlp->forward(hidden_states));
    } else {
      hidden_states = shared_mlp->forward(hidden_states);
    }
    return ops::add(residual, ops::mul_number(hidden_states, residual_multiplier_));
  }
  int64_t final_norm_parameters() const override { return hidden_size_; }

 private:
  int64_t hidden_size_;
  double residual_multiplier_;
  nn::LlamaRMSNorm input_layernorm;  // GraniteMoeHybridRMSNorm: Llama's
  nn::LlamaRMSNorm post_attention_layernorm;
  std::optional<GraniteMoeHybridMoE> block_sparse_moe;
  std::optional<GraniteMoeHybridMLP> shared_mlp;
  std::optional<nn::Mamba2Mixer> mamba;
  std::optional<LlamaAttention> self_attn;
  nn::RotaryEmbedding rotary_emb;  // the model's (GraniteMoeHybridRotaryEmbedding, default rope)
};

namespace {

Result<ModelConfig> read_granitemoehybrid(const ConfigReader& r);

std::unique_ptr<DecoderLayer> build_granitemoehybrid_layer(const ModelConfig& config, int64_t index) {
  return std::make_unique<GraniteMoeHybridDecoderLayer>(config, index);
}

// GraniteMoeHybridModel and GraniteMoeHybridForCausalLM around the layers: inputs_embeds times
// embedding_multiplier (given ones too, which is why the model is not cut into stages); the rotary only
// where position_embedding_type is "rope" (else no rotary module, no buffers, and the attention rotates
// nothing); the logits divided by logits_scaling.
class GraniteMoeHybridForCausalLM final : public CausalLM {
 public:
  GraniteMoeHybridForCausalLM(const ModelConfig& c, const ModelConfig& layer_config, ModelChunk chunk)
      : CausalLM(c, layer_config, chunk) {
    if (!c.model_rotary) state_rotary_buffers({});
  }

 protected:
  Tensor embed(const Tensor& input_ids) const override {
    return ops::mul_number(CausalLM::embed(input_ids), config_.embedding_multiplier);
  }
  std::vector<nn::PositionEmbeddings> embed_positions(const Tensor& inputs_embeds) const override {
    if (!config_.model_rotary) return {nn::PositionEmbeddings()};
    return CausalLM::embed_positions(inputs_embeds);
  }
  bool layers_take_position_ids() const override { return false; }
  Tensor logits(const Tensor& hidden_states) const override {
    return ops::div_number(CausalLM::logits(hidden_states), config_.logits_scaling);
  }
};

std::unique_ptr<CausalLM> build_granitemoehybrid_causal_lm(const ModelConfig& config, const ModelConfig& layer_config,
                                                           ModelChunk chunk) {
  return make_causal_lm<GraniteMoeHybridForCausalLM>(config, layer_config, chunk);
}

const char* pipeline_refusal(const ModelConfig& /*config*/, int64_t /*boundary*/) {
  return "GraniteMoeHybridModel multiplies inputs_embeds by embedding_multiplier even when a stage is handed them, "
         "so a later stage would scale its received hidden states again";
}

}  // namespace

CENSUS_FAMILY(kGraniteMoeHybridFamily) = {
    .model_type = "granitemoehybrid",
    .read = read_granitemoehybrid,
    .build_layer = build_granitemoehybrid_layer,
    .build_final_norm = build_llama_final_norm,
    .build_causal_lm = build_granitemoehybrid_causal_lm,
    .pipeline_refusal = pipeline_refusal,
};

namespace {

// layer_types (layers_block_type by attribute_map; legacy mamba / attention remapped), every layer a
// Mamba-2 mixer by default. Kinds as the census names them: mamba, attention.
Status read_granite_layer_types(const ConfigReader& r, ModelConfig& c) {
  c.layer_types.assign(static_cast<size_t>(c.num_hidden_layers), "mamba");
  const char* field = r.has("layer_types") ? "layer_types" : r.has("layers_block_type") ? "layers_block_type" : nullptr;
  if (field == nullptr) return {};
  CENSUS_ASSIGN(const std::vector<std::string> types,
                r.layer_kinds(field, c.num_hidden_layers, {"linear_attention", "mamba", "full_attention", "attention"}));
  c.layer_types.clear();
  for (const std::string& name : types)
    c.layer_types.emplace_back(name == "linear_attention" || name == "mamba" ? "mamba" : "attention");
  return {};
}

// The Mamba-2 mixer as GraniteMoeHybridMambaLayer sizes it: mamba_expand * hidden_size wide,
// mamba_d_head "auto" = that width / mamba_n_heads, dt clamped from below by time_step_limit[0], its
// norm over the whole width (no groups).
Result<nn::Mamba2Sizes> read_granite_mamba(const ConfigReader& r, const ModelConfig& c) {
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
  m.intermediate_size = expand * c.hidden_size;
  const bool auto_head = !r.has("mamba_d_head") || (r.json().at("mamba_d_head").is_string() &&
                                                    r.json().at("mamba_d_head").get<std::string>() == "auto");
  if (auto_head) {
    m.head_dim = m.intermediate_size / m.num_heads;
  } else {
    CENSUS_ASSIGN(m.head_dim, r.size("mamba_d_head", 1));
  }
  if (m.num_heads * m.head_dim != m.intermediate_size)
    return refuse("mamba_n_heads", std::to_string(m.num_heads) + " heads of " + std::to_string(m.head_dim) +
                                       " do not make the mixer's width " + std::to_string(m.intermediate_size) +
                                       " (mamba_expand * hidden_size); fix the config");
  if (m.num_heads % m.n_groups != 0)
    return refuse("mamba_n_groups", std::to_string(m.n_groups) + " does not divide mamba_n_heads " +
                                        std::to_string(m.num_heads) + "; fix the config");
  m.time_step_min = 0.0;
  if (r.has("time_step_limit")) {
    const nlohmann::json& limit = r.json().at("time_step_limit");
    if (!limit.is_array() || limit.size() != 2 || !limit.at(0).is_number())
      return refuse("time_step_limit", "must be two numbers [min, max]; fix the config");
    m.time_step_min = limit.at(0).get<double>();
  }
  m.out_proj_bias = m.use_bias;
  m.norm_eps = c.rms_norm_eps;
  return m;
}

// GraniteMoeHybridConfig: hidden 4096, 32 heads, 8 experts of intermediate_size 11008, top 2, a
// shared MLP of 1024, Mamba-2 of 128 heads with state 256 on every layer.
Result<ModelConfig> read_granitemoehybrid(const ConfigReader& r) {
  CENSUS_ASSIGN(ModelConfig c, read_llama_like(r, kGraniteMoeHybridFamily, {32000, 4096, 11008, 32, 32, std::nullopt, std::nullopt}));
  c.kinds_from_layer_types = true;
  CENSUS_TRY(read_attention_bias(r, c));
  CENSUS_ASSIGN(c.residual_multiplier, r.positive_number("residual_multiplier", 1.0));
  CENSUS_ASSIGN(c.embedding_multiplier, r.positive_number("embedding_multiplier", 1.0));
  CENSUS_ASSIGN(c.logits_scaling, r.positive_number("logits_scaling", 1.0));
  CENSUS_ASSIGN(const std::string position_embedding_type, r.text("position_embedding_type", ""));
  if (!position_embedding_type.empty() && position_embedding_type != "rope")
    return refuse("position_embedding_type", echoed(position_embedding_type) + " is not known; use \"rope\" or null (no rotary)");
  c.model_rotary = position_embedding_type == "rope";
  CENSUS_ASSIGN(const int64_t experts, r.count("num_local_experts", 8));
  if (experts > 0) {
    CENSUS_TRY(read_routed_experts(r, "num_local_experts", "num_experts", 8, 2, c.moe));
  }
  CENSUS_ASSIGN(c.moe.moe_shared_expert_intermediate_size, r.size("shared_intermediate_size", 1024));
  CENSUS_TRY(read_granite_layer_types(r, c));
  CENSUS_ASSIGN(c.mamba, read_granite_mamba(r, c));
  return c;
}

}  // namespace
}  // namespace census
