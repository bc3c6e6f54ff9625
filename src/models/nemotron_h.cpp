// Nemotron-H and Nemotron 3 (transformers/models/nemotron_h/modeling_nemotron_h.py, Transformers 5):
// a stack of NemotronHBlock, each a pre-norm residual around one mixer, which layers_block_type (or
// the legacy hybrid_override_pattern, M E * -) makes a Mamba-2 mixer, an attention without rotary, a
// relu² MLP or a MoE. Every block's mixer is named `mixer`, so the reference's name rules read all
// its saves as ffMM (and its FLOPs and parameters as ffn), the norm inside the Mamba-2 mixer and the
// block's own norm as normOp, the relu² as ffAct; the census follows them.
//
// Legend: S = seq_length, H = hidden_size, Nh = heads, Nkv = KV heads, D = head_dim, I = widths.
#include <optional>

#include "util/escape.h"
#include "models/causal_lm.h"
#include "models/llama.h"
#include "models/moe_layers.h"
#include "nn/attention_kernel.h"
#include "nn/deepseek_moe.h"
#include "nn/linear.h"
#include "nn/mamba2_mixer.h"
#include "nn/rms_norm.h"
#include "ops/ops.h"

namespace census {
namespace {

constexpr const char* kMixer = "mixer";

// NemotronHMLP: down_proj(act_fn(up_proj(x))), no gate; act_fn is ACT2FN["relu2"].
class NemotronHMLP {
 public:
  NemotronHMLP(const std::string& path, int64_t hidden_size, int64_t intermediate_size, bool bias,
               nn::ParameterList& params)
      : path_(path), up_proj(nn::child_path(path, "up_proj"), hidden_size, intermediate_size, bias, params),
        down_proj(nn::child_path(path, "down_proj"), intermediate_size, hidden_size, bias, params),
        act_fn(nn::child_path(path, "act_fn"), nn::HiddenAct::kRelu2) {}
  Tensor forward(const Tensor& x) const {
    ModuleScope scope(path_, ModuleKind::kOther);
    return down_proj.forward(act_fn.forward(up_proj.forward(x)));
  }

 private:
  std::string path_;
  nn::Linear up_proj;
  nn::Linear down_proj;
  nn::Activation act_fn;
};

// NemotronHMoE: DeepSeek-V3's group-limited sigmoid router (NemotronHTopkRouter, the same statements)
// on the block's input; the ungated relu² experts (NemotronHExperts, has_gate=False) on its (T, H)
// view, or on its moe_latent_size projection (fc1_latent_proj, then fc2_latent_proj back) where the
// config has one; the shared NemotronHMLP of moe_shared_expert_intermediate_size on the input, added.
// Registered as the module registers them: experts, gate, shared_experts, the latent projections.
class NemotronHMoE {
 public:
  NemotronHMoE(const ModelConfig& c, nn::ParameterList& params)
      : experts("mixer.experts", c.moe.num_experts / c.moe.expert_parallel, c.moe.moe_latent_size > 0 ? c.moe.moe_latent_size : c.hidden_size,
                c.moe.moe_intermediate_size, nn::HiddenAct::kRelu2, c.moe.experts_implementation, params,
                ungated()),
        gate("mixer.gate", routing(c), c.hidden_size, params),
        shared_experts("mixer.shared_experts", c.hidden_size, c.moe.moe_shared_expert_intermediate_size, c.mlp_bias,
                       params) {
    if (c.moe.moe_latent_size > 0) {
      fc1_latent_proj.emplace("mixer.fc1_latent_proj", c.hidden_size, c.moe.moe_latent_size, c.mlp_bias, params);
      fc2_latent_proj.emplace("mixer.fc2_latent_proj", c.moe.moe_latent_size, c.hidden_size, c.mlp_bias, params);
    }
  }
  Tensor forward(const Tensor& input) const {
    ModuleScope scope(kMixer, ModuleKind::kOther);
    const Tensor residuals = input;
    const Dims orig_shape = input.sizes();
    nn::Routing routed = gate.forward(input);  // router_logits bound to `_`, alive until the return
    Tensor hidden_states = ops::view(input, Dims{input.numel() / input.size(-1), input.size(-1)});
    if (fc1_latent_proj) hidden_states = fc1_latent_proj->forward(hidden_states);
    hidden_states = experts.forward(hidden_states, routed.indices, routed.weights);
    if (fc2_latent_proj) hidden_states = fc2_latent_proj->forward(hidden_states);
    hidden_states = ops::view(hidden_states, orig_shape);
    return ops::add(hidden_states, shared_experts.forward(residuals));
  }
  const Tensor& e_score_correction_bias() const { return gate.e_score_correction_bias(); }

 private:
  static nn::ExpertsLayout ungated() {
    nn::ExpertsLayout layout;
    layout.has_gate = false;
    return layout;
  }
  static nn::GroupLimitedRouting routing(const ModelConfig& c) {
    return {c.moe.num_experts, c.moe.num_experts_per_tok, c.moe.n_group, c.moe.topk_group, c.moe.norm_topk_prob,
            c.moe.routed_scaling_factor};
  }
  nn::Experts experts;
  nn::DeepseekV3TopkRouter gate;
  NemotronHMLP shared_experts;
  std::optional<nn::Linear> fc1_latent_proj;
  std::optional<nn::Linear> fc2_latent_proj;
};

// NemotronHAttention: q, k, v and o without bias, no rotary, the flash contract.
class NemotronHAttention {
 public:
  NemotronHAttention(const ModelConfig& c, nn::ParameterList& params)
      : kernels_(c.kernels), head_dim_(c.head_dim),
        q_proj("mixer.q_proj", c.hidden_size, c.num_attention_heads * c.head_dim, false, params),
        k_proj("mixer.k_proj", c.hidden_size, c.num_key_value_heads * c.head_dim, false, params),
        v_proj("mixer.v_proj", c.hidden_size, c.num_key_value_heads * c.head_dim, false, params),
        o_proj("mixer.o_proj", c.num_attention_heads * c.head_dim, c.hidden_size, false, params) {}
  Tensor forward(const Tensor& hidden_states) const {
    ModuleScope scope(kMixer, ModuleKind::kOther);
    const int64_t batch = hidden_states.size(0), seq = hidden_states.size(1);
    auto heads = [&](const Tensor& projected) {
      return ops::transpose(ops::view(projected, Dims{batch, seq, projected.size(-1) / head_dim_, head_dim_}), 1, 2);
    };
    Tensor query_states = heads(q_proj.forward(hidden_states));  // (1, Nh, S, D)
    Tensor key_states = heads(k_proj.forward(hidden_states));    // (1, Nkv, S, D)
    Tensor value_states = heads(v_proj.forward(hidden_states));
    Tensor attn_output = nn::flash_attention_forward(query_states, key_states, value_states, kernels_);  // (1, S, Nh, D)
    attn_output = ops::contiguous(ops::reshape(attn_output, Dims{batch, seq, attn_output.size(2) * attn_output.size(3)}));
    return o_proj.forward(attn_output);
  }

 private:
  nn::KernelProfile kernels_;
  int64_t head_dim_;
  nn::Linear q_proj;
  nn::Linear k_proj;
  nn::Linear v_proj;
  nn::Linear o_proj;
};

}  // namespace

// NemotronHBlock: residual + mixer(norm(x)), the norm registered first.
class NemotronHBlock final : public DecoderLayer {
 public:
  NemotronHBlock(const ModelConfig& c, const nn::Mamba2Sizes& mamba, int64_t index)
      : hidden_size_(c.hidden_size), norm("norm", c.hidden_size, c.rms_norm_eps, parameters_) {
    const std::string& type = c.layer_types[static_cast<size_t>(index)];
    if (type == "mamba") mamba_.emplace(kMixer, mamba, parameters_);
    else if (type == "attention") attention_.emplace(c, parameters_);
    else if (type == "moe") moe_.emplace(c, parameters_);
    else mlp_.emplace(kMixer, c.hidden_size, c.intermediate_size, c.mlp_bias, parameters_);
  }
  nn::PositionEmbeddings embed_positions(const Tensor& /*hidden*/) const override { return {}; }
  Tensor forward(const Tensor& input, const nn::PositionEmbeddings& /*positions*/) const override {
    Tensor residual = input;
    Tensor hidden_states = norm.forward(input);  // .to(norm.weight.dtype): bf16 already, no op
    if (mamba_) hidden_states = mamba_->forward(hidden_states);
    else if (attention_) hidden_states = attention_->forward(hidden_states);
    else if (moe_) hidden_states = moe_->forward(hidden_states);
    else hidden_states = mlp_->forward(hidden_states);
    return ops::add(residual, hidden_states);
  }
  std::vector<Tensor> registered_buffers() const override {
    if (moe_) return {moe_->e_score_correction_bias()};
    return {};
  }
  int64_t final_norm_parameters() const override { return hidden_size_; }

 private:
  int64_t hidden_size_;
  nn::LlamaRMSNorm norm;  // NemotronHRMSNorm: Llama's
  std::optional<nn::Mamba2Mixer> mamba_;
  std::optional<NemotronHAttention> attention_;
  std::optional<NemotronHMoE> moe_;
  std::optional<NemotronHMLP> mlp_;
};

namespace {

Result<ModelConfig> read_nemotron_h(const ConfigReader& r);


std::unique_ptr<DecoderLayer> build_nemotron_h_layer(const ModelConfig& config, int64_t index) {
  nn::Mamba2Sizes mamba{};
  if (config.mamba) mamba = *config.mamba;
  return std::make_unique<NemotronHBlock>(config, mamba, index);
}

// NemotronHForCausalLM upcasts its logits itself, lm_head(hidden_states[:, slice_indices, :]).float(): the
// bf16 logits die at once, and the loss's own .float() is then a no-op.
class NemotronHForCausalLM final : public CausalLM {
 public:
  using CausalLM::CausalLM;

 protected:
  Tensor logits(const Tensor& hidden_states) const override {
    return ops::to(CausalLM::logits(hidden_states), DType::kFloat32);
  }
};

std::unique_ptr<CausalLM> build_nemotron_h_causal_lm(const ModelConfig& config, const ModelConfig& layer_config,
                                                     ModelChunk chunk) {
  return make_causal_lm<NemotronHForCausalLM>(config, layer_config, chunk);
}

}  // namespace

CENSUS_FAMILY(kNemotronHFamily) = {.model_type = "nemotron_h",
                                   .read = read_nemotron_h,
                                   .build_layer = build_nemotron_h_layer,
                                   .build_final_norm = build_llama_final_norm,
                                   .build_causal_lm = build_nemotron_h_causal_lm};

namespace {

// A field read under its current name, or the legacy mamba_* name the config class pops first.
Result<int64_t> size_or_legacy(const ConfigReader& r, const char* name, const char* legacy, int64_t fallback) {
  if (r.has(legacy)) return r.size(legacy, fallback);
  return r.size(name, fallback);
}

// layers_block_type (layer_types by attribute_map), else hybrid_override_pattern, else the config's
// default [linear_attention, moe, full_attention, mlp]; legacy names remapped. Kinds as the census
// names them: mamba, moe, attention, mlp.
Status read_block_types(const ConfigReader& r, ModelConfig& c) {
  std::vector<std::string> types;
  const char* field = r.has("layers_block_type") ? "layers_block_type" : r.has("layer_types") ? "layer_types" : nullptr;
  // NemotronHConfig takes its layer count from the list or pattern (a num_hidden_layers that differs
  // is only warned about): each entry is a layer, and their number is checked as any per-layer list's.
  if (field != nullptr) {
    const nlohmann::json& stated = r.json().at(field);
    if (!stated.is_array()) return refuse(field, "must be a list of block types, not " + shown(stated) + "; fix the config");
    CENSUS_TRY(check_per_layer(field, static_cast<int64_t>(stated.size()), std::nullopt));
    CENSUS_ASSIGN(types, r.layer_kinds(field, static_cast<int64_t>(stated.size()),
                                       {"linear_attention", "mamba", "full_attention", "attention", "moe", "mlp"}));
  } else if (r.has("hybrid_override_pattern")) {
    if (!r.json().at("hybrid_override_pattern").is_string())
      return refuse("hybrid_override_pattern", "must be a string of M, E, * and -, one per layer, not " +
                                                   shown(r.json().at("hybrid_override_pattern")) + "; fix the config");
    const std::string& pattern = r.json().at("hybrid_override_pattern").get_ref<const std::string&>();
    CENSUS_TRY(check_per_layer("hybrid_override_pattern", static_cast<int64_t>(pattern.size()), std::nullopt));
    for (char symbol : pattern) {
      switch (symbol) {
        case 'M': types.emplace_back("linear_attention"); break;
        case 'E': types.emplace_back("moe"); break;
        case '*': types.emplace_back("full_attention"); break;
        case '-': types.emplace_back("mlp"); break;
        default:
          return refuse("hybrid_override_pattern", "has " + echoed(std::string(1, symbol)) + "; known: M, E, *, -");
      }
    }
  } else {
    types = {"linear_attention", "moe", "full_attention", "mlp"};
  }
  c.layer_types.clear();
  for (const std::string& type : types) {
    if (type == "linear_attention" || type == "mamba") c.layer_types.emplace_back("mamba");
    else if (type == "full_attention" || type == "attention") c.layer_types.emplace_back("attention");
    else c.layer_types.push_back(type);  // moe, mlp
  }
  c.num_hidden_layers = static_cast<int64_t>(c.layer_types.size());
  return {};
}

// The Mamba-2 mixer's sizes as NemotronHMamba2Mixer reads them: its width is mamba_num_heads *
// mamba_head_dim (not expand * hidden_size), its norm normalises groups of I / n_groups, dt is clamped
// from below by time_step_min (above by inf, whatever time_step_limit says), the projections biased
// by use_bias.
Result<nn::Mamba2Sizes> read_mamba_sizes(const ConfigReader& r, const ModelConfig& c) {
  nn::Mamba2Sizes m{};
  m.hidden_size = c.hidden_size;
  CENSUS_ASSIGN(m.num_heads, r.size("mamba_num_heads", 128));
  CENSUS_ASSIGN(m.head_dim, r.size("mamba_head_dim", 64));
  CENSUS_ASSIGN(m.n_groups, size_or_legacy(r, "n_groups", "mamba_n_groups", 8));
  CENSUS_ASSIGN(m.ssm_state_size, r.size("ssm_state_size", 128));
  CENSUS_ASSIGN(m.conv_kernel, size_or_legacy(r, "conv_kernel", "mamba_d_conv", 4));
  CENSUS_ASSIGN(m.chunk_size, size_or_legacy(r, "chunk_size", "mamba_chunk_size", 128));
  const char* conv_bias = r.has("mamba_conv_bias") ? "mamba_conv_bias" : "use_conv_bias";
  CENSUS_ASSIGN(m.use_conv_bias, r.flag(conv_bias, true));
  CENSUS_ASSIGN(m.use_bias, r.flag("use_bias", false));
  const char* dt_min = r.has("mamba_dt_min") ? "mamba_dt_min" : "time_step_min";
  CENSUS_ASSIGN(m.time_step_min, r.positive_number(dt_min, 0.001));
  m.out_proj_bias = m.use_bias;
  m.norm_eps = c.rms_norm_eps;
  m.intermediate_size = m.num_heads * m.head_dim;
  if (m.num_heads % m.n_groups != 0 || m.intermediate_size % m.n_groups != 0)
    return refuse("n_groups", std::to_string(m.n_groups) + " does not divide mamba_num_heads " +
                                  std::to_string(m.num_heads) + "; fix the config");
  m.norm_group_size = m.intermediate_size / m.n_groups;
  auto act = r.text("mamba_hidden_act", "silu");
  CENSUS_TRY(act);
  if (*act != "silu") return refuse("mamba_hidden_act", echoed(*act) + " is not priced (silu is); use silu");
  return m;
}

// The MoE blocks' fields (NemotronHConfig's defaults: 8 experts of 7688, top 2, one shared MLP of
// 7688, routing as DeepSeek-V3's in one group). The MoE layers are the "moe" blocks: the others are
// listed as mlp_only_layers, so that is_moe_layer says which they are.
Status read_moe(const ConfigReader& r, ModelConfig& c) {
  CENSUS_TRY(read_routed_experts(r, "n_routed_experts", "num_local_experts", 8, 2, c.moe));
  CENSUS_ASSIGN(c.moe.moe_intermediate_size, r.size("moe_intermediate_size", 7688));
  CENSUS_ASSIGN(c.moe.moe_shared_expert_intermediate_size, r.size("moe_shared_expert_intermediate_size", 7688));
  CENSUS_ASSIGN(c.moe.moe_latent_size, r.count("moe_latent_size", 0));
  CENSUS_ASSIGN(c.moe.n_group, r.size("n_group", 1));
  CENSUS_ASSIGN(c.moe.topk_group, r.size("topk_group", 1));
  CENSUS_ASSIGN(c.moe.norm_topk_prob, r.flag("norm_topk_prob", true));
  CENSUS_ASSIGN(c.moe.routed_scaling_factor, r.positive_number("routed_scaling_factor", 1.0));
  if (c.moe.num_experts % c.moe.n_group != 0)
    return refuse("n_routed_experts", std::to_string(c.moe.num_experts) + " experts cannot be routed in " +
                                          std::to_string(c.moe.n_group) + " groups to " +
                                          std::to_string(c.moe.num_experts_per_tok) + " per token; fix the config");
  c.moe.mlp_only_layers.clear();
  for (int64_t i = 0; i < c.num_hidden_layers; ++i)
    if (c.layer_types[static_cast<size_t>(i)] != "moe") c.moe.mlp_only_layers.push_back(i);
  return {};
}

// NemotronHConfig: hidden 4096, 32 heads of 128, 8 KV heads, relu² MLP of 21504, Mamba-2 of 128
// heads of 64 with 8 groups of state 128, the four block types in turn; layer_norm_epsilon 1e-5.
Result<ModelConfig> read_nemotron_h(const ConfigReader& r) {
  ModelConfig c;
  c.family = &kNemotronHFamily;
  c.model_type = kNemotronHFamily.model_type;
  c.kinds_from_layer_types = true;
  CENSUS_TRY(read_block_types(r, c));
  CENSUS_ASSIGN(c.vocab_size, r.size("vocab_size", 131072));
  CENSUS_ASSIGN(c.hidden_size, r.size("hidden_size", 4096));
  CENSUS_ASSIGN(c.intermediate_size, r.size("intermediate_size", 21504));
  CENSUS_ASSIGN(c.num_attention_heads, r.size("num_attention_heads", 32));
  CENSUS_ASSIGN(c.num_key_value_heads, r.size("num_key_value_heads", c.num_attention_heads));
  CENSUS_ASSIGN(c.head_dim, r.size("head_dim", 128));
  CENSUS_ASSIGN(c.rms_norm_eps, r.positive_number("layer_norm_epsilon", 1e-5));
  CENSUS_ASSIGN(c.mlp_bias, r.flag("mlp_bias", false));
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    return refuse("num_key_value_heads", std::to_string(c.num_key_value_heads) + " does not divide num_attention_heads " +
                                             std::to_string(c.num_attention_heads) + "; fix the config");
  auto act = r.text("mlp_hidden_act", "relu2");
  CENSUS_TRY(act);
  if (*act != "relu2") return refuse("mlp_hidden_act", echoed(*act) + " is not priced (relu2 is); use relu2");
  CENSUS_ASSIGN(c.mamba, read_mamba_sizes(r, c));
  CENSUS_TRY(read_moe(r, c));
  return c;
}

}  // namespace
}  // namespace census
