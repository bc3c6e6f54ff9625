// Gemma 4's text model (transformers/models/gemma4/modeling_gemma4.py, Transformers 5; model_type
// gemma4_text, also the text_config of a gemma4 config). Gemma4TextDecoderLayer, statement by statement:
//
//   attention   q_proj, q_norm, rotary (cos and sin unsqueezed on dim 2), then k_proj, v_proj, k_norm,
//               rotary, v_norm (an RMSNorm without weight); no scaling of the scores (scaling 1.0).
//               Sliding layers' heads are head_dim wide; full layers' global_head_dim wide, with their
//               own K/V heads where attention_k_eq_v is set (num_global_key_value_heads), and no v_proj
//               then: the values are k_proj's output, v_norm'd apart from k_norm.
//   sandwich    input_layernorm, post_attention_layernorm, pre_feedforward_layernorm,
//               post_feedforward_layernorm, all Gemma4RMSNorm (the weight on the fp32 states, pow(-0.5)).
//   MoE         where enable_moe_block is set, the dense MLP and the MoE block side by side on the same
//               residual: post_feedforward_layernorm_1(mlp(...)) + post_feedforward_layernorm_2(experts(
//               pre_feedforward_layernorm_2(residual))), routed by Gemma4TextRouter (a weightless norm,
//               a scale, softmax in fp32, top-k, renormalized, times per_expert_scale[index]).
//   per-layer   where hidden_size_per_layer_input is set: per_layer_projection(act_fn(
//   input       per_layer_input_gate(h)) * per_layer_input), post_per_layer_input_norm, residual; the
//               model computes every layer's per_layer_input once (Gemma4Prologue below).
//   layer_scalar  the layer's output scaled in place by a (1) buffer, which the multiply keeps (made
//                 without a dtype: fp32 in a model built in fp32, the bf16 output staying bf16).
//
// KV sharing: the last num_kv_shared_layers layers build no k_proj, v_proj, k_norm nor v_norm; each
// attends with the keys and values the last earlier layer of its type stored (shared_kv_states), so
// it cannot run alone (Family::stack_only): `census stack` and `census activations` price it inside
// the model's forward. Their kinds are "<type>+kv_shared".
//
// A layer censused alone takes its per_layer_input as the reference hands it one: a (1, S, P) tensor
// made inside the measured forward, needing no gradient, so the multiply keeps it and not its other
// operand. In the model the per-layer inputs need gradients (they come from the embedding's
// projection): there the multiply keeps both, and the first layer keeps the whole (1, S, L, P) tensor.
//
// Legend: S = seq_length, H = hidden_size, Nh = heads, Nkv = K/V heads, D = the layer's head width,
// I = intermediate_size, P = hidden_size_per_layer_input, L = num_hidden_layers.
#include <cmath>
#include <optional>
#include <set>
#include <stdexcept>

#include "models/causal_lm.h"
#include "models/gemma.h"
#include "models/llama.h"
#include "nn/attention_kernel.h"
#include "nn/linear.h"
#include "nn/mlp.h"
#include "nn/moe.h"
#include "nn/rotary.h"
#include "ops/embedding.h"
#include "ops/ops.h"
#include "util/escape.h"

namespace census {
namespace {

constexpr const char* kSliding = "sliding_attention";
constexpr const char* kFull = "full_attention";
constexpr std::string_view kSharedMark = "+kv_shared";

// Whether layer `index` is one of the last num_kv_shared_layers (the reader refuses sharing every layer).
bool kv_shared(const ModelConfig& c, int64_t index) {
  return c.gemma4.num_kv_shared_layers > 0 && index >= c.num_hidden_layers - c.gemma4.num_kv_shared_layers;
}

// Layer `index`'s attention type, its kind less the KV-shared mark.
std::string attention_type(const ModelConfig& c, int64_t index) {
  const std::string& kind = c.layer_types[static_cast<size_t>(index)];
  return kind.ends_with(kSharedMark) ? kind.substr(0, kind.size() - kSharedMark.size()) : kind;
}

bool is_full(const ModelConfig& c, int64_t index) { return attention_type(c, index) == kFull; }
int64_t layer_head_dim(const ModelConfig& c, int64_t index) {
  return is_full(c, index) ? c.gemma4.global_head_dim : c.head_dim;
}
int64_t layer_kv_heads(const ModelConfig& c, int64_t index) {
  return is_full(c, index) ? c.gemma4.num_global_key_value_heads : c.num_key_value_heads;
}

const char* stack_only(const ModelConfig& c, int64_t index) {
  return kv_shared(c, index) ? "it is one of the last num_kv_shared_layers layers, which attend with the keys and "
                               "values an earlier layer of their type computed in the same forward (shared_kv_states), "
                               "and cannot run without them"
                             : nullptr;
}

// Gemma4RMSNorm: the mean square on the fp32 states, raised to -0.5 (torch.pow), the weight applied in
// fp32 before the cast back; `with_scale` false (v_norm, the router's norm) has no weight.
//
//   h = x.float()                          saved by pow(2) and the product
//   m = h.pow(2).mean(-1) + eps            (.., 1) fp32 saved by pow(-0.5)
//   y = h * m.pow(-0.5)                    pow(-0.5)'s result saved by the product
//   y = y * weight.float()                 y (fp32) and the weight (D, fp32) saved by that product
//   out = y.type_as(x)
class Gemma4RMSNorm final : public nn::Norm {
 public:
  Gemma4RMSNorm(std::string path, int64_t dim, double eps, nn::ParameterList& params, bool with_scale = true)
      : path_(std::move(path)), eps_(eps) {
    if (with_scale) weight_ = nn::register_parameter(params, path_, "weight", Dims{dim});
  }
  Tensor forward(const Tensor& x) const override {
    ModuleScope scope(path_, ModuleKind::kNorm);
    Tensor h = ops::to(x, DType::kFloat32);
    Tensor mean_squared = ops::add(ops::mean(ops::pow(h, 2), -1, /*keepdim=*/true), eps_);
    Tensor normed = ops::mul(h, ops::pow(mean_squared, -0.5));
    h = Tensor();
    mean_squared = Tensor();
    if (weight_.defined()) normed = ops::mul(normed, ops::to(weight_, DType::kFloat32));
    return ops::to(normed, x.dtype());
  }

 private:
  std::string path_;
  double eps_;
  Tensor weight_;  // (D) bf16, or undefined
};

// apply_rotary_pos_emb(x, cos, sin, unsqueeze_dim=2): (x * cos) + (rotate_half(x) * sin) on the
// (B, S, N, D) heads, before their transpose.
Tensor rotate(const Tensor& x, const nn::PositionEmbeddings& positions) {
  const Tensor cos = ops::unsqueeze(positions.cos, 2);
  const Tensor sin = ops::unsqueeze(positions.sin, 2);
  Tensor rotated = ops::mul(x, cos);
  return ops::add(rotated, ops::mul(nn::rotate_half(x), sin));
}

class Gemma4TextAttention {
 public:
  Gemma4TextAttention(const ModelConfig& c, int64_t index, nn::ParameterList& params)
      : kernels_(c.kernels),
        type_(attention_type(c, index)),
        head_dim_(layer_head_dim(c, index)),
        shared_(kv_shared(c, index)),
        q_proj("self_attn.q_proj", c.hidden_size, c.num_attention_heads * head_dim_, c.qkv_bias, params),
        q_norm("self_attn.q_norm", head_dim_, c.rms_norm_eps, params),
        o_proj_in_(c.num_attention_heads * head_dim_) {
    // The last layer of its type before the KV-shared ones stores its keys and values for them.
    const int64_t first_shared = c.num_hidden_layers - c.gemma4.num_kv_shared_layers;
    if (!shared_) {
      int64_t last = -1;
      for (int64_t i = 0; i < first_shared; ++i)
        if (attention_type(c, i) == type_) last = i;
      store_full_length_kv_ = index == last;
      const int64_t kv = layer_kv_heads(c, index);
      k_norm.emplace("self_attn.k_norm", head_dim_, c.rms_norm_eps, params);
      v_norm.emplace("self_attn.v_norm", head_dim_, c.rms_norm_eps, params, /*with_scale=*/false);
      k_proj.emplace("self_attn.k_proj", c.hidden_size, kv * head_dim_, c.qkv_bias, params);
      if (!(c.gemma4.attention_k_eq_v && type_ == kFull))
        v_proj.emplace("self_attn.v_proj", c.hidden_size, kv * head_dim_, c.qkv_bias, params);
    }
    o_proj.emplace("self_attn.o_proj", o_proj_in_, c.hidden_size, c.qkv_bias, params);
  }

  Tensor forward(const Tensor& hidden_states, const nn::PositionEmbeddings& positions, LayerCarry& carry) const {
    ModuleScope scope(path_, ModuleKind::kOther);
    const int64_t batch = hidden_states.size(0), seq = hidden_states.size(1);
    auto heads = [&](const Tensor& states) {  // view(*input_shape, -1, head_dim)
      return ops::view(states, Dims{batch, seq, states.size(-1) / head_dim_, head_dim_});
    };
    Tensor query_states = heads(q_proj.forward(hidden_states));
    query_states = q_norm.forward(query_states);
    query_states = rotate(query_states, positions);
    query_states = ops::transpose(query_states, 1, 2);

    Tensor key_states, value_states;
    if (shared_) {
      const auto found = carry.shared_kv.find(type_);
      if (found == carry.shared_kv.end()) throw std::logic_error("a KV-shared layer runs only inside the model's forward");
      std::tie(key_states, value_states) = found->second;
    } else {
      key_states = heads(k_proj->forward(hidden_states));
      value_states = v_proj ? heads(v_proj->forward(hidden_states)) : key_states;
      key_states = k_norm->forward(key_states);
      key_states = rotate(key_states, positions);
      key_states = ops::transpose(key_states, 1, 2);
      value_states = v_norm->forward(value_states);
      value_states = ops::transpose(value_states, 1, 2);
    }
    if (store_full_length_kv_) carry.shared_kv[type_] = {key_states, value_states};

    Tensor attn_output = nn::flash_attention_forward(query_states, key_states, value_states, kernels_);  // (B, S, Nh, D)
    query_states = Tensor();
    key_states = Tensor();
    value_states = Tensor();
    attn_output = ops::contiguous(ops::reshape(attn_output, Dims{batch, seq, o_proj_in_}));
    return o_proj->forward(attn_output);
  }

 private:
  std::string path_ = "self_attn";
  nn::KernelProfile kernels_;
  std::string type_;
  int64_t head_dim_;
  bool shared_;
  bool store_full_length_kv_ = false;
  nn::Linear q_proj;  // H -> Nh*D
  Gemma4RMSNorm q_norm;
  int64_t o_proj_in_;
  std::optional<Gemma4RMSNorm> k_norm;  // none on a KV-shared layer
  std::optional<Gemma4RMSNorm> v_norm;
  std::optional<nn::Linear> k_proj;     // H -> Nkv*D
  std::optional<nn::Linear> v_proj;     // none where k_proj's output is the values (attention_k_eq_v)
  std::optional<nn::Linear> o_proj;     // Nh*D -> H
};

// Gemma4TextRouter: the router's input normed without weight, scaled by `scale` and 1/sqrt(H), its
// softmax in fp32, the top-k renormalized in place and scaled by each expert's per_expert_scale.
//   saves: the norm's fp32 states, the scaled input (T, H) by proj, the fp32 probabilities, the top-k
//   indices, a clone of the values and their sum (the in-place division), the renormalized values and
//   the gathered scales (T, K) by the last product, and the indices by the gather.
class Gemma4TextRouter {
 public:
  Gemma4TextRouter(const ModelConfig& c, nn::ParameterList& params)
      : top_k_(c.moe.num_experts_per_tok),
        scalar_root_size_(std::pow(static_cast<double>(c.hidden_size), -0.5)),
        norm("router.norm", c.hidden_size, c.rms_norm_eps, params, /*with_scale=*/false),
        // named_parameters lists a module's own parameters before its children's.
        scale_(nn::register_parameter(params, "router", "scale", Dims{c.hidden_size})),
        per_expert_scale_(nn::register_parameter(params, "router", "per_expert_scale", Dims{c.moe.num_experts})),
        proj("router.proj", c.hidden_size, c.moe.num_experts, /*bias=*/false, params) {}

  nn::Routing forward(const Tensor& input) const {
    ModuleScope scope("router", ModuleKind::kOther);
    Tensor hidden_states = norm.forward(input);
    hidden_states = ops::mul_number(ops::mul(hidden_states, scale_), scalar_root_size_);
    Tensor expert_scores = proj.forward(hidden_states);  // (T, E)
    const Tensor router_probabilities = ops::softmax(expert_scores, -1, DType::kFloat32);
    auto [top_k_weights, top_k_index] = ops::topk(router_probabilities, top_k_);
    ops::div_(top_k_weights, ops::sum(top_k_weights, {1}, /*keepdim=*/true));  // sum(dim=-1) of (T, K)
    top_k_weights = ops::mul(top_k_weights, ops::index(per_expert_scale_, top_k_index));
    return {router_probabilities, top_k_weights, top_k_index};
  }

 private:
  int64_t top_k_;
  double scalar_root_size_;
  Gemma4RMSNorm norm;
  Tensor scale_;             // (H)
  Tensor per_expert_scale_;  // (E)
  nn::Linear proj;           // H -> E
};

// The MoE block beside the MLP, where enable_moe_block is set.
struct Gemma4MoeBlock {
  Gemma4MoeBlock(const ModelConfig& c, nn::ParameterList& params)
      : router(c, params),
        experts("experts", c.moe.num_experts / c.moe.expert_parallel, c.hidden_size, c.moe.moe_intermediate_size,
                c.hidden_act, c.moe.experts_implementation, params),
        post_feedforward_layernorm_1("post_feedforward_layernorm_1", c.hidden_size, c.rms_norm_eps, params),
        post_feedforward_layernorm_2("post_feedforward_layernorm_2", c.hidden_size, c.rms_norm_eps, params),
        pre_feedforward_layernorm_2("pre_feedforward_layernorm_2", c.hidden_size, c.rms_norm_eps, params) {}
  Gemma4TextRouter router;
  nn::Experts experts;
  Gemma4RMSNorm post_feedforward_layernorm_1;
  Gemma4RMSNorm post_feedforward_layernorm_2;
  Gemma4RMSNorm pre_feedforward_layernorm_2;
};

// The per-layer input's modules, where hidden_size_per_layer_input is set.
struct Gemma4PerLayerInput {
  Gemma4PerLayerInput(const ModelConfig& c, nn::ParameterList& params)
      : act_fn("act_fn", c.hidden_act),
        per_layer_input_gate("per_layer_input_gate", c.hidden_size, c.gemma4.hidden_size_per_layer_input, false, params),
        per_layer_projection("per_layer_projection", c.gemma4.hidden_size_per_layer_input, c.hidden_size, false, params),
        post_per_layer_input_norm("post_per_layer_input_norm", c.hidden_size, c.rms_norm_eps, params) {}
  nn::Activation act_fn;
  nn::Linear per_layer_input_gate;  // H -> P
  nn::Linear per_layer_projection;  // P -> H
  Gemma4RMSNorm post_per_layer_input_norm;
};

class Gemma4TextDecoderLayer final : public DecoderLayer {
 public:
  Gemma4TextDecoderLayer(const ModelConfig& c, int64_t index)
      : hidden_size_(c.hidden_size),
        type_(attention_type(c, index)),
        per_layer_width_(c.gemma4.hidden_size_per_layer_input),
        self_attn(c, index, parameters_),
        // Gemma4TextMLP: twice intermediate_size on the KV-shared layers where use_double_wide_mlp is set.
        mlp("mlp", c.hidden_size, c.intermediate_size * (c.gemma4.use_double_wide_mlp && kv_shared(c, index) ? 2 : 1),
            /*bias=*/false, parameters_, c.hidden_act),
        input_layernorm("input_layernorm", c.hidden_size, c.rms_norm_eps, parameters_),
        post_attention_layernorm("post_attention_layernorm", c.hidden_size, c.rms_norm_eps, parameters_),
        pre_feedforward_layernorm("pre_feedforward_layernorm", c.hidden_size, c.rms_norm_eps, parameters_),
        post_feedforward_layernorm("post_feedforward_layernorm", c.hidden_size, c.rms_norm_eps, parameters_),
        layer_scalar_(make_tensor(Dims{1}, Session::current().default_dtype())),
        rotary_emb(layer_head_dim(c, index)) {
    if (per_layer_width_ > 0) per_layer_input.emplace(c, parameters_);
    if (c.moe.num_experts > 0) moe.emplace(c, parameters_);
  }

  // The rotary of the layer's type, as the model computes it once for every layer of that type.
  nn::PositionEmbeddings embed_positions(const Tensor& hidden) const override { return rotary_emb.forward(hidden); }

  // The per-layer input as the reference hands a lone layer one: made before the call, inside the
  // measurement, needing no gradient; and an empty shared_kv_states, which the layer fills where it is
  // the last of its type before the KV-shared ones (a checkpoint keeps both, and with them those keys
  // and values).
  bool has_lone_arguments() const override { return true; }
  LayerCarry lone_arguments(const Tensor& hidden) const override {
    LayerCarry arguments;
    if (per_layer_width_ > 0)
      arguments.per_layer_input = ops::randn(Dims{hidden.size(0), hidden.size(1), per_layer_width_}, hidden.dtype());
    return arguments;
  }

  Tensor forward(const Tensor& input, const nn::PositionEmbeddings& positions) const override {
    LayerCarry arguments = lone_arguments(input);
    return run(input, positions, arguments);
  }
  Tensor forward_alone(const Tensor& input, const nn::PositionEmbeddings& positions, LayerCarry& arguments) const override {
    return run(input, positions, arguments);
  }

  // In the model's forward the rotary of the layer's type comes from the model (the carry).
  Tensor forward_in_model(const Tensor& input, const nn::PositionEmbeddings& /*positions*/, LayerCarry& carry) const override {
    return run(input, carry.positions.at(type_), carry);
  }

  int64_t final_norm_parameters() const override { return hidden_size_; }
  std::vector<Tensor> buffers() const override { return {layer_scalar_}; }

 private:
  Tensor run(const Tensor& input, const nn::PositionEmbeddings& positions, LayerCarry& carry) const {
    Tensor residual = input;
    Tensor hidden_states = input_layernorm.forward(input);
    hidden_states = self_attn.forward(hidden_states, positions, carry);
    hidden_states = post_attention_layernorm.forward(hidden_states);
    hidden_states = ops::add(residual, hidden_states);

    residual = hidden_states;
    hidden_states = pre_feedforward_layernorm.forward(hidden_states);
    hidden_states = mlp.forward(hidden_states);
    if (moe) {
      Tensor hidden_states_1 = moe->post_feedforward_layernorm_1.forward(hidden_states);
      // The MoE block takes the hidden states from before the MLP.
      const Tensor hidden_states_flat = ops::reshape(residual, Dims{residual.numel() / hidden_size_, hidden_size_});
      nn::Routing routing = moe->router.forward(hidden_states_flat);
      routing.logits = Tensor();  // the probabilities the block drops
      Tensor hidden_states_2 = moe->pre_feedforward_layernorm_2.forward(hidden_states_flat);
      hidden_states_2 = moe->experts.forward(hidden_states_2, routing.indices, routing.weights);
      hidden_states_2 = ops::reshape(hidden_states_2, residual.sizes());
      hidden_states_2 = moe->post_feedforward_layernorm_2.forward(hidden_states_2);
      hidden_states = ops::add(hidden_states_1, hidden_states_2);
    }
    hidden_states = post_feedforward_layernorm.forward(hidden_states);
    hidden_states = ops::add(residual, hidden_states);

    if (per_layer_input) {
      residual = hidden_states;
      hidden_states = per_layer_input->per_layer_input_gate.forward(hidden_states);
      hidden_states = per_layer_input->act_fn.forward(hidden_states);
      hidden_states = ops::mul(hidden_states, carry.per_layer_input);
      hidden_states = per_layer_input->per_layer_projection.forward(hidden_states);
      hidden_states = per_layer_input->post_per_layer_input_norm.forward(hidden_states);
      hidden_states = ops::add(residual, hidden_states);
    }
    residual = Tensor();
    ops::mul_(hidden_states, layer_scalar_);
    return hidden_states;
  }

  int64_t hidden_size_;
  std::string type_;
  int64_t per_layer_width_;
  Gemma4TextAttention self_attn;
  nn::GatedMLP mlp;
  Gemma4RMSNorm input_layernorm;
  Gemma4RMSNorm post_attention_layernorm;
  Gemma4RMSNorm pre_feedforward_layernorm;
  Gemma4RMSNorm post_feedforward_layernorm;
  Tensor layer_scalar_;  // (1) buffer, torch.ones(1): the default dtype (fp32 in a model built in fp32)
  std::optional<Gemma4PerLayerInput> per_layer_input;
  std::optional<Gemma4MoeBlock> moe;
  nn::RotaryEmbedding rotary_emb;  // the model's, of this layer's type, held here so one layer can run alone
};

// Gemma4TextModel and Gemma4ForCausalLM around the layers: the scaled token embedding
// (Gemma4TextScaledWordEmbedding, whose multiply keeps its (0-d) embed_scale buffer), the per-layer
// inputs (get_per_layer_inputs, then project_per_layer_inputs), one rotary per layer type; and in its
// loop, each layer's per-layer input, per_layer_inputs[:, :, i, :] (a select, whose backward allocates
// the whole (B, S, L, P) gradient), and the shared_kv_states dict every layer reads and writes.
class Gemma4ForCausalLM final : public CausalLM {
 public:
  Gemma4ForCausalLM(const ModelConfig& c, const ModelConfig& layer_config, ModelChunk chunk)
      : CausalLM(c, layer_config, chunk),
        hidden_size_(c.hidden_size),
        layer_count_(c.num_hidden_layers),
        per_layer_width_(c.gemma4.hidden_size_per_layer_input),
        embed_scale_(make_tensor(Dims{}, Session::current().default_dtype())) {
    add_buffer(embed_scale_);
    if (per_layer_width_ > 0) {
      nn::ParameterList& params = model_parameters();
      embed_tokens_per_layer_ = nn::register_parameter(params, "model.embed_tokens_per_layer", "weight",
                                                       Dims{c.gemma4.vocab_size_per_layer_input, layer_count_ * per_layer_width_});
      per_layer_embed_scale_ = make_tensor(Dims{}, Session::current().default_dtype());
      add_buffer(per_layer_embed_scale_);
      per_layer_model_projection.emplace("model.per_layer_model_projection", c.hidden_size,
                                         layer_count_ * per_layer_width_, /*bias=*/false, params);
      per_layer_projection_norm.emplace("model.per_layer_projection_norm", per_layer_width_, c.rms_norm_eps, params);
    }
    // One rotary per layer type, in the order the types first appear.
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      const std::string type = attention_type(c, i);
      bool seen = false;
      for (const auto& each : rotaries_) seen = seen || each.first == type;
      if (!seen) rotaries_.emplace_back(type, nn::RotaryEmbedding(layer_head_dim(c, i)));
    }
    // Gemma4TextRotaryEmbedding: each type's inv_freq and original_inv_freq.
    std::vector<Tensor> inv_freqs;
    for (const auto& [type, rotary] : rotaries_) inv_freqs.push_back(rotary.inv_freq());
    state_rotary_buffers(inv_freqs);
  }

  Tensor model_forward(const Tensor& input_ids, const Tensor& /*inputs_embeds*/, const LayerRunner& runner) const override {
    const int64_t batch = input_ids.size(0), seq = input_ids.size(1);
    auto carry = std::make_shared<LayerCarry>();  // what the layers read and write: shared_kv_states
    Tensor inputs_embeds;
    {
      ModuleScope scope("embed_tokens", ModuleKind::kOther);
      // * self.embed_scale.to(self.weight.dtype): a no-op beside a bf16 scale
      inputs_embeds = ops::mul(ops::embedding(embed_tokens->weight(), input_ids),
                               ops::to(embed_scale_, embed_tokens->weight().dtype()));
    }
    if (per_layer_width_ > 0) {
      Tensor per_layer_inputs;
      {
        ModuleScope scope("embed_tokens_per_layer", ModuleKind::kOther);
        per_layer_inputs = ops::mul(ops::embedding(embed_tokens_per_layer_, input_ids),
                                    ops::to(per_layer_embed_scale_, embed_tokens_per_layer_.dtype()));
      }
      const Dims per_layer_shape{batch, seq, layer_count_, per_layer_width_};
      per_layer_inputs = ops::reshape(per_layer_inputs, per_layer_shape);
      Tensor per_layer_projection = ops::mul_number(per_layer_model_projection->forward(inputs_embeds),
                                                    std::pow(static_cast<double>(hidden_size_), -0.5));
      per_layer_projection = ops::reshape(per_layer_projection, per_layer_shape);
      per_layer_projection = per_layer_projection_norm->forward(per_layer_projection);
      carry->per_layer_inputs = ops::mul_number(ops::add(per_layer_projection, per_layer_inputs), std::pow(2.0, -0.5));
    }
    Tensor position_ids;  // the model's one, every type's rotary rotating by it
    for (const auto& [type, rotary] : rotaries_) {
      nn::PositionEmbeddings& positions = carry->positions[type] = rotary.forward(inputs_embeds);
      if (position_ids.defined()) positions.position_ids = position_ids;
      else position_ids = positions.position_ids;
    }
    Tensor hidden_states = inputs_embeds;
    for (size_t k = 0; k < layers_.size(); ++k) {
      const int64_t index = chunk_.begin + static_cast<int64_t>(k);
      // The layer's per-layer input is bound by value, as the model's loop hands it.
      const Tensor per_layer_input = per_layer_width_ > 0 ? ops::select(carry->per_layer_inputs, 2, index) : Tensor();
      const DecoderLayer* layer = layers_[k].get();
      hidden_states = runner.run(index, hidden_states, [layer, carry, per_layer_input](const Tensor& input) {
        carry->per_layer_input = per_layer_input;
        return layer->forward_in_model(input, nn::PositionEmbeddings(), *carry);
      });
    }
    return final_norm(hidden_states);
  }

 protected:
  Tensor logits(const Tensor& hidden_states) const override {
    return softcap_logits(CausalLM::logits(hidden_states), config_.final_logit_softcapping);
  }

 private:
  int64_t hidden_size_;
  int64_t layer_count_;
  int64_t per_layer_width_;
  Tensor embed_scale_;             // () bf16 buffer, sqrt(H)
  Tensor embed_tokens_per_layer_;  // (V_per_layer, L * P)
  Tensor per_layer_embed_scale_;   // () bf16 buffer, sqrt(P)
  std::optional<nn::Linear> per_layer_model_projection;  // H -> L * P
  std::optional<Gemma4RMSNorm> per_layer_projection_norm;
  std::vector<std::pair<std::string, nn::RotaryEmbedding>> rotaries_;
};

Result<ModelConfig> read_gemma4_text(const ConfigReader& r);

std::unique_ptr<DecoderLayer> build_gemma4_layer(const ModelConfig& config, int64_t index) {
  return std::make_unique<Gemma4TextDecoderLayer>(config, index);
}

std::unique_ptr<nn::Norm> build_gemma4_final_norm(const ModelConfig& config, nn::ParameterList& params) {
  return std::make_unique<Gemma4RMSNorm>("norm", config.hidden_size, config.rms_norm_eps, params);
}

std::unique_ptr<CausalLM> build_gemma4_causal_lm(const ModelConfig& config, const ModelConfig& layer_config,
                                                  ModelChunk chunk) {
  return make_causal_lm<Gemma4ForCausalLM>(config, layer_config, chunk);
}

const char* pipeline_refusal(const ModelConfig& /*config*/, int64_t /*boundary*/) {
  return "Gemma 4's model builds every layer's per-layer input from the input ids and embeddings, and its "
         "KV-shared layers read the keys and values of layers on earlier stages";
}

}  // namespace

CENSUS_FAMILY(kGemma4TextFamily) = {
    .model_type = "gemma4_text",
    .read = read_gemma4_text,
    .build_layer = build_gemma4_layer,
    .build_final_norm = build_gemma4_final_norm,
    .stack_only = stack_only,
    .build_causal_lm = build_gemma4_causal_lm,
    .pipeline_refusal = pipeline_refusal,
    .ties_word_embeddings = true,
    .composite_ties_word_embeddings = true,
    .liger_patches = true,
};

namespace {

// A layer type's head width and K/V heads.
struct TypeShape {
  int64_t head_dim;
  int64_t kv_heads;
  // The fields that stated them, which a refusal names.
  std::string head_dim_field;
  std::string kv_heads_field;
};

// per_layer_config, where the config states it: overrides of head_dim and num_key_value_heads by layer
// index, which must agree across the layers of a type (Gemma4TextRotaryEmbedding reads one config per
// type). Each type's shape starts from `sliding` / `full` and is replaced by its layers' overrides.
Status read_per_layer_config(const ConfigReader& r, const ModelConfig& c, TypeShape& sliding, TypeShape& full) {
  const nlohmann::json& stated = r.json().at("per_layer_config");
  if (!stated.is_object()) return refuse("per_layer_config", "must map layer indices to overrides, not " + shown(stated));
  std::map<std::string, std::optional<TypeShape>> by_type;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    TypeShape shape = attention_type(c, i) == kFull ? full : sliding;
    const std::string key = std::to_string(i);
    if (stated.contains(key)) {
      const nlohmann::json& overrides = stated.at(key);
      if (!overrides.is_object()) return refuse("per_layer_config." + key, "must be an object of overrides, not " + shown(overrides));
      for (const auto& [name, value] : overrides.items())
        if (name != "head_dim" && name != "num_key_value_heads")
          return refuse("per_layer_config." + key + "." + name,
                        "is not priced per layer (Census reads head_dim and num_key_value_heads there); fix the config");
      const ConfigReader layer(overrides, "per_layer_config." + key + ".");
      CENSUS_ASSIGN(shape.head_dim, layer.size("head_dim", shape.head_dim));
      CENSUS_ASSIGN(shape.kv_heads, layer.size("num_key_value_heads", shape.kv_heads));
      if (overrides.contains("head_dim")) shape.head_dim_field = "per_layer_config." + key + ".head_dim";
      if (overrides.contains("num_key_value_heads")) shape.kv_heads_field = "per_layer_config." + key + ".num_key_value_heads";
    }
    auto& seen = by_type[attention_type(c, i)];
    if (seen && (seen->head_dim != shape.head_dim || seen->kv_heads != shape.kv_heads))
      return refuse("per_layer_config", "gives the " + attention_type(c, i) + " layers different shapes (layer " + key +
                                            "); every layer of a type must share its rotary's head_dim, fix the config");
    seen = shape;
  }
  for (const auto& [key, value] : stated.items()) {
    const bool index = !key.empty() && key.find_first_not_of("0123456789") == std::string::npos && key.size() < 8;
    if (!index || std::stoll(key) >= c.num_hidden_layers)
      return refuse("per_layer_config", "has key " + echoed(key) + ", not a layer index in [0, " +
                                            std::to_string(c.num_hidden_layers) + "); fix the config");
  }
  if (by_type.contains(kSliding)) sliding = *by_type.at(kSliding);
  full = *by_type.at(kFull);
  return {};
}

Status check_type_shape(const ModelConfig& c, const char* type, const TypeShape& shape) {
  if (shape.head_dim % 2 != 0)
    return refuse(shape.head_dim_field, "gives the " + std::string(type) + " layers a head_dim of " +
                                            std::to_string(shape.head_dim) + ", odd; rotary embeddings need an even one");
  if (c.num_attention_heads % shape.kv_heads != 0)
    return refuse(shape.kv_heads_field, "gives the " + std::string(type) + " layers " + std::to_string(shape.kv_heads) +
                                            " key/value heads, which do not divide num_attention_heads " +
                                            std::to_string(c.num_attention_heads) + "; fix the config");
  return {};
}

// rope_parameters: one entry per layer type, "default" or "proportional" (both make cos and sin the
// layer's whole head width; proportional zeroes the frequencies past its partial_rotary_factor).
Status read_rope_types(const ConfigReader& r, const ModelConfig& c) {
  CENSUS_ASSIGN(const auto rope, r.section("rope_parameters"));
  if (!rope) return {};  // Gemma4TextConfig's defaults: sliding "default", full "proportional"
  std::set<std::string> types;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) types.insert(attention_type(c, i));
  for (const std::string& type : types) {
    CENSUS_ASSIGN(const auto params, rope->section(type.c_str()));
    if (!params) return refuse("rope_parameters." + type, "is missing; state the rotary of every layer type");
    CENSUS_ASSIGN(const std::string rope_type, params->text("rope_type", "default"));
    if (rope_type != "default" && rope_type != "proportional")
      return refuse("rope_parameters." + type + ".rope_type",
                    echoed(rope_type) + " is not priced for Gemma 4 (it reads default and proportional)");
  }
  return {};
}

// Gemma4TextConfig: Gemma's sizes with its defaults; five sliding layers to one full, the last forced
// full; the full layers' shape from global_head_dim (512) and, where attention_k_eq_v is set,
// num_global_key_value_heads, unless per_layer_config states the layers' shapes.
Result<ModelConfig> read_gemma4_text(const ConfigReader& r) {
  CENSUS_ASSIGN(ModelConfig c, read_gemma_config(r, kGemma4TextFamily, {262144, 2304, 9216, 30, 8, 4, 256}));
  CENSUS_TRY(read_gemma_layer_types(r, c, 6));
  c.layer_types.back() = kFull;  // as Gemma4TextConfig forces it

  CENSUS_ASSIGN(c.gemma4.attention_k_eq_v, r.flag("attention_k_eq_v", false));
  TypeShape sliding{c.head_dim, c.num_key_value_heads, "head_dim", "num_key_value_heads"};
  CENSUS_ASSIGN(const int64_t global_head_dim, r.size("global_head_dim", 512));
  TypeShape full{global_head_dim, c.num_key_value_heads, "global_head_dim", "num_key_value_heads"};
  if (c.gemma4.attention_k_eq_v && r.has("num_global_key_value_heads")) {
    CENSUS_ASSIGN(full.kv_heads, r.size("num_global_key_value_heads", std::nullopt));
    full.kv_heads_field = "num_global_key_value_heads";
  }
  if (r.has("per_layer_config")) {
    // The stated per_layer_config replaces what global_head_dim would derive.
    full = TypeShape{c.head_dim, c.num_key_value_heads, "head_dim", "num_key_value_heads"};
    CENSUS_TRY(read_per_layer_config(r, c, sliding, full));
  }
  CENSUS_TRY(check_type_shape(c, kSliding, sliding));
  CENSUS_TRY(check_type_shape(c, kFull, full));
  c.head_dim = sliding.head_dim;
  c.num_key_value_heads = sliding.kv_heads;
  c.gemma4.global_head_dim = full.head_dim;
  c.gemma4.num_global_key_value_heads = full.kv_heads;
  CENSUS_TRY(read_rope_types(r, c));
  CENSUS_TRY(read_final_logit_softcapping(r, c, 0));

  CENSUS_ASSIGN(c.gemma4.num_kv_shared_layers, r.count("num_kv_shared_layers", 0));
  const int64_t first_shared = c.num_hidden_layers - c.gemma4.num_kv_shared_layers;
  if (first_shared <= 0)
    return refuse("num_kv_shared_layers", std::to_string(c.gemma4.num_kv_shared_layers) +
                                              " shares the keys and values of every layer, leaving none to compute them; "
                                              "it must be below num_hidden_layers");
  std::set<std::string> computed;  // the types of the layers that compute their keys and values
  for (int64_t j = 0; j < first_shared; ++j) computed.insert(attention_type(c, j));
  for (int64_t i = first_shared; i < c.num_hidden_layers; ++i) {
    const std::string type = attention_type(c, i);
    if (!computed.contains(type))
      return refuse("num_kv_shared_layers", "makes layer " + std::to_string(i) + " (" + type +
                                                ") share the keys and values of an earlier " + type +
                                                " layer, and there is none; fix layer_types or num_kv_shared_layers");
    c.layer_types[static_cast<size_t>(i)] = type + std::string(kSharedMark);
  }
  c.kinds_from_layer_types = true;  // every layer runs the same feed-forward: its kind is its attention
  CENSUS_ASSIGN(c.gemma4.use_double_wide_mlp, r.flag("use_double_wide_mlp", false));

  CENSUS_ASSIGN(c.gemma4.hidden_size_per_layer_input, r.count("hidden_size_per_layer_input", 256));
  CENSUS_ASSIGN(c.gemma4.vocab_size_per_layer_input, r.size("vocab_size_per_layer_input", 262144));

  CENSUS_ASSIGN(const bool moe, r.flag("enable_moe_block", false));
  if (moe) {
    CENSUS_ASSIGN(c.moe.num_experts, r.size("num_experts", std::nullopt));
    CENSUS_ASSIGN(c.moe.num_experts_per_tok, r.size("top_k_experts", std::nullopt));
    CENSUS_ASSIGN(c.moe.moe_intermediate_size, r.size("moe_intermediate_size", std::nullopt));
    if (c.moe.num_experts_per_tok > c.moe.num_experts)
      return refuse("top_k_experts", std::to_string(c.moe.num_experts_per_tok) + " exceeds the " +
                                         std::to_string(c.moe.num_experts) + " experts; a token cannot pick more experts than there are");
    CENSUS_ASSIGN(const std::string implementation, r.text("_experts_implementation", "grouped_mm"));
    if (implementation != "grouped_mm" && implementation != "eager")
      return refuse("_experts_implementation", echoed(implementation) + " is not priced; use grouped_mm or eager");
    c.moe.experts_implementation =
        implementation == "eager" ? nn::ExpertsImplementation::kEager : nn::ExpertsImplementation::kGroupedMm;
  }
  return c;
}

}  // namespace
}  // namespace census
