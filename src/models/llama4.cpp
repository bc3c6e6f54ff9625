// Llama 4's text layers (transformers/models/llama4/modeling_llama4.py, Transformers 5; model_type
// llama4_text, or a llama4 config's text_config):
//   - Llama4TextAttention: the rotary as a complex product (queries and keys read as complex64 pairs
//     times freqs_cis), then a weightless L2 norm of q and k (use_qk_norm) in the rotary layers
//     ("chunked_attention": their chunked mask changes no shape); the NoPE layers ("full_attention",
//     no_rope_layers 0) neither rotate nor norm, and scale their queries by a per-position temperature
//     (attn_temperature_tuning), in fp32;
//   - Llama4TextMoe on the layers moe_layers lists (every interleave_moe_layer_step-th): a linear router
//     whose top-k logits, scattered into -inf and put through a sigmoid, scale the inputs of every
//     expert (each token is repeated once per expert); Llama4TextExperts run all experts as two bmm over
//     those inputs; the shared expert's output takes the experts' sum in place. Other layers run
//     Llama4TextMLP of intermediate_size_mlp.
//   - Llama4TextRMSNorm: the fp32 norm cast back, then times the weight.
//
// Legend: S = seq_length, T = tokens, H = hidden_size, Nh = heads, Nkv = key/value heads, D = head_dim,
// E = experts, I = intermediate_size (an expert's and the shared expert's width).
#include <limits>
#include <tuple>
#include <utility>

#include "models/llama.h"
#include "models/moe_layers.h"
#include "nn/attention_kernel.h"
#include "ops/ops.h"

namespace census {
namespace {

bool uses_rope(const ModelConfig& c, int64_t index) {
  return c.layer_types[static_cast<size_t>(index)] == "chunked_attention";
}

// Llama4TextRMSNorm: _norm(x.float()).type_as(x) * weight.
class Llama4TextRMSNorm final : public nn::Norm {
 public:
  Llama4TextRMSNorm(std::string path, int64_t dim, double eps, nn::ParameterList& params)
      : path_(std::move(path)), eps_(eps), weight_(nn::register_parameter(params, path_, "weight", Dims{dim})) {}
  Tensor forward(const Tensor& x) const override {
    ModuleScope scope(path_, ModuleKind::kNorm);
    Tensor h = ops::to(x, DType::kFloat32);
    Tensor output = ops::mul(h, ops::rsqrt(ops::add(ops::mean(ops::pow(h, 2), -1, /*keepdim=*/true), eps_)));
    h = Tensor();
    output = ops::to(output, x.dtype());
    return ops::mul(output, weight_);
  }

 private:
  std::string path_;
  double eps_;
  Tensor weight_;  // (H)
};

// Llama4TextL2Norm: _norm(x.float()).type_as(x), no weight. `path` must outlive the census.
Tensor l2_norm(const std::string& path, const Tensor& x, double eps) {
  ModuleScope scope(path, ModuleKind::kNorm);
  Tensor h = ops::to(x, DType::kFloat32);
  Tensor output = ops::mul(h, ops::rsqrt(ops::add(ops::mean(ops::pow(h, 2), -1, /*keepdim=*/true), eps)));
  h = Tensor();
  return ops::to(output, x.dtype());
}

// Llama4TextRotaryEmbedding: freqs_cis = polar(ones, positions x inv_freq) * attention_scaling, (1, S,
// D/2) complex64, computed under no_grad. Handed to the layer as PositionEmbeddings::cos (and sin, the
// same tensor).
class Llama4TextRotaryEmbedding {
 public:
  explicit Llama4TextRotaryEmbedding(int64_t head_dim) : inv_freq_(make_tensor(Dims{head_dim / 2}, DType::kFloat32)) {}
  nn::PositionEmbeddings forward(const Tensor& hidden) const {
    nn::PositionEmbeddings out;
    out.position_ids = ops::unsqueeze(ops::arange(hidden.size(1)), 0);
    NoGradGuard no_grad;
    Tensor inv_freq_expanded = ops::unsqueeze(ops::unsqueeze(inv_freq_, 0), 2);                 // (1, D/2, 1)
    Tensor position_ids_expanded = ops::to(ops::unsqueeze(out.position_ids, 1), DType::kFloat32);  // (1, 1, S)
    // (inv_freq_expanded @ position_ids_expanded).transpose(1, 2): (1, S, D/2) fp32; a broadcast
    // multiply allocates the same bytes as the batched matmul.
    Tensor freqs = ops::transpose(ops::mul(inv_freq_expanded, position_ids_expanded), 1, 2);
    Tensor freqs_cis = ops::polar(ops::ones_like(freqs), freqs);
    const double attention_scaling = 1.0;  // scales values only, never shapes
    out.cos = ops::mul_number(freqs_cis, attention_scaling);
    out.sin = out.cos;  // one tensor: the census hands both on as the model's shared embeddings
    return out;
  }

 private:
  Tensor inv_freq_;  // (D/2) fp32
};

// apply_rotary_emb on (1, S, N, D) bf16: x.float() read as (1, S, N, D/2) complex64, times
// freqs_cis[:, :, None, :] (which the product keeps), back to (1, S, N, D) fp32, then type_as(x).
std::pair<Tensor, Tensor> apply_rotary_emb(const Tensor& xq, const Tensor& xk, const Tensor& freqs_cis) {
  auto as_complex = [](const Tensor& x) {
    Tensor f = ops::to(x, DType::kFloat32);
    return ops::view_as_complex(ops::view(f, Dims{x.size(0), x.size(1), x.size(2), x.size(3) / 2, 2}));
  };
  Tensor xq_ = as_complex(xq);
  Tensor xk_ = as_complex(xk);
  auto rotate = [&](const Tensor& x_, const Tensor& x) {
    Tensor product = ops::view_as_real(ops::mul(x_, ops::unsqueeze(freqs_cis, 2)));  // (1, S, N, D/2, 2)
    return ops::view(product, x.sizes());                                           // flatten(3)
  };
  Tensor xq_out = rotate(xq_, xq);
  Tensor xk_out = rotate(xk_, xk);
  xq_ = Tensor();
  xk_ = Tensor();
  return {ops::to(xq_out, xq.dtype()), ops::to(xk_out, xk.dtype())};
}

class Llama4TextAttention {
 public:
  Llama4TextAttention(const ModelConfig& c, int64_t index, nn::ParameterList& params)
      : kernels_(c.kernels),
        head_dim_(c.head_dim),
        eps_(c.rms_norm_eps),
        use_rope_(uses_rope(c, index)),
        qk_norm_(c.qk_norm && use_rope_),
        temperature_tuning_(c.attn_temperature_tuning && !use_rope_),
        q_proj("self_attn.q_proj", c.hidden_size, c.num_attention_heads * c.head_dim, c.qkv_bias, params),
        k_proj("self_attn.k_proj", c.hidden_size, c.num_key_value_heads * c.head_dim, c.qkv_bias, params),
        v_proj("self_attn.v_proj", c.hidden_size, c.num_key_value_heads * c.head_dim, c.qkv_bias, params),
        o_proj("self_attn.o_proj", c.num_attention_heads * c.head_dim, c.hidden_size, c.o_bias, params) {}

  Tensor forward(const Tensor& hidden_states, const nn::PositionEmbeddings& positions) const {
    ModuleScope scope("self_attn", ModuleKind::kOther);
    const int64_t batch = hidden_states.size(0), seq = hidden_states.size(1);
    auto heads = [&](const nn::Linear& proj) {
      Tensor states = proj.forward(hidden_states);
      return ops::view(states, Dims{batch, seq, states.size(-1) / head_dim_, head_dim_});  // (1, S, N, D)
    };
    Tensor query_states = heads(q_proj);
    Tensor key_states = heads(k_proj);
    Tensor value_states = ops::transpose(heads(v_proj), 1, 2);  // (1, Nkv, S, D)
    if (use_rope_) {
      auto [q_embed, k_embed] = apply_rotary_emb(query_states, key_states, positions.cos);
      query_states = q_embed;
      key_states = k_embed;
    }
    if (qk_norm_) {
      query_states = l2_norm(qk_norm_path_, query_states, eps_);
      key_states = l2_norm(qk_norm_path_, key_states, eps_);
    }
    if (temperature_tuning_) {
      // attn_scales = log1p(floor((positions.float() + 1.0) / floor_scale)) * attn_scale + 1.0, on
      // positions = arange(S) + past_seen_tokens; viewed (1, S, 1, 1) and expanded.
      // (floor_scale and attn_scale change values only.)
      Tensor scales = ops::add(ops::arange(seq), 0.0);
      scales = ops::add(ops::to(scales, DType::kFloat32), 1.0);
      scales = ops::log1p(ops::floor(ops::div_number(scales, 8192.0)));
      scales = ops::add(ops::mul_number(scales, 0.1), 1.0);
      scales = ops::expand(ops::view(scales, Dims{1, seq, 1, 1}), Dims{batch, seq, 1, 1});
      query_states = ops::to(ops::mul(query_states, scales), query_states.dtype());  // the product is fp32
    }
    query_states = ops::transpose(query_states, 1, 2);  // (1, Nh, S, D)
    key_states = ops::transpose(key_states, 1, 2);      // (1, Nkv, S, D)
    Tensor attn_output = nn::flash_attention_forward(query_states, key_states, value_states, kernels_);  // (1, S, Nh, D)
    attn_output = ops::contiguous(ops::reshape(attn_output, Dims{batch, seq, attn_output.size(2) * attn_output.size(3)}));
    return o_proj.forward(attn_output);
  }

 private:
  nn::KernelProfile kernels_;
  int64_t head_dim_;
  double eps_;
  bool use_rope_;
  bool qk_norm_;
  bool temperature_tuning_;
  std::string qk_norm_path_ = "self_attn.qk_norm";  // observers keep views of module paths
  nn::Linear q_proj;  // H -> Nh*D
  nn::Linear k_proj;  // H -> Nkv*D
  nn::Linear v_proj;  // H -> Nkv*D
  nn::Linear o_proj;  // Nh*D -> H
};

// Llama4TextExperts: every expert over every token's (scaled) input, two bmm.
//   saves: the inputs (E, T, H) and the gated product (E, T, I) by the bmm; the up projection
//   (E, T, 2I) by the activation (gate) and the product (up); the activation's output (E, T, I).
class Llama4TextExperts {
 public:
  Llama4TextExperts(const ModelConfig& c, nn::ParameterList& params)
      : num_experts_(c.moe.num_experts),
        hidden_size_(c.hidden_size),
        gate_up_proj_(nn::register_parameter(params, "feed_forward.experts", "gate_up_proj",
                                             Dims{c.moe.num_experts, c.hidden_size, 2 * c.moe.moe_intermediate_size})),
        down_proj_(nn::register_parameter(params, "feed_forward.experts", "down_proj",
                                          Dims{c.moe.num_experts, c.moe.moe_intermediate_size, c.hidden_size})),
        act_fn("feed_forward.experts.act_fn", c.hidden_act) {}

  Tensor forward(const Tensor& hidden_states) const {
    ModuleScope scope("feed_forward.experts", ModuleKind::kOther);
    Tensor states = ops::view(hidden_states, Dims{num_experts_, hidden_states.size(0) / num_experts_, hidden_size_});
    Tensor gate_up = ops::bmm(states, gate_up_proj_);  // (E, T, 2I)
    std::vector<Tensor> halves = ops::chunk(gate_up, 2, -1);
    gate_up = Tensor();
    const Tensor gate = halves[0], up = halves[1];
    halves.clear();
    Tensor next_states = ops::bmm(ops::mul(up, act_fn.forward(gate)), down_proj_);  // (E, T, H)
    return ops::view(next_states, Dims{next_states.size(0) * next_states.size(1), hidden_size_});
  }

 private:
  int64_t num_experts_;
  int64_t hidden_size_;
  Tensor gate_up_proj_;  // (E, H, 2I)
  Tensor down_proj_;     // (E, I, H)
  nn::Activation act_fn;
};

class Llama4TextMoe final : public nn::FeedForward {
 public:
  Llama4TextMoe(const ModelConfig& c, nn::ParameterList& params)
      : top_k_(c.moe.num_experts_per_tok),
        hidden_dim_(c.hidden_size),
        experts(c, params),
        router("feed_forward.router", c.hidden_size, c.moe.num_experts, /*bias=*/false, params),
        shared_expert("feed_forward.shared_expert", c.hidden_size, c.moe.shared_expert_intermediate_size,
                      /*bias=*/false, params, c.hidden_act, "activation_fn") {}

  Tensor forward(const Tensor& input) const override { return forward_with_router_logits(input).first; }

  // Llama4TextMoe.forward returns (out, router_logits); its router_scores live until it returns.
  std::pair<Tensor, Tensor> forward_with_router_logits(const Tensor& input) const {
    ModuleScope scope("feed_forward", ModuleKind::kOther);
    Tensor hidden_states = ops::reshape(input, Dims{input.size(0) * input.size(1), hidden_dim_});  // (T, H)
    auto [router_scores, router_logits] = route(hidden_states);                                  // (T, E) bf16 each
    const int64_t num_experts = router_scores.size(1);
    Tensor routed_in = ops::repeat(hidden_states, Dims{num_experts, 1});                           // (E T, H)
    routed_in = ops::mul(routed_in, ops::reshape(ops::transpose(router_scores, 0, 1), Dims{num_experts * hidden_states.size(0), 1}));
    Tensor routed_out = experts.forward(routed_in);
    Tensor out = shared_expert.forward(hidden_states);
    ops::add_(out, ops::sum(ops::view(routed_out, Dims{num_experts, hidden_states.size(0), hidden_dim_}), {0},
                            /*keepdim=*/false));
    return {out, router_logits};
  }

 private:
  // Llama4Router: logits = x W^T; the top-k logits scattered into -inf; sigmoid in fp32, cast back.
  // Returns (router_scores, router_logits).
  std::pair<Tensor, Tensor> route(const Tensor& hidden_states) const {
    Tensor router_logits = router.forward(hidden_states);  // (T, E) bf16
    ModuleScope scope("feed_forward.router", ModuleKind::kOther);
    ops::ValuesIndices top = ops::topk(router_logits, top_k_);
    Tensor router_scores = ops::full_like(router_logits, -std::numeric_limits<double>::infinity());
    ops::scatter_(router_scores, 1, top.indices, top.values);
    top = {};
    return {ops::to(ops::sigmoid(ops::to(router_scores, DType::kFloat32)), router_scores.dtype()), router_logits};
  }

  int64_t top_k_;
  int64_t hidden_dim_;
  Llama4TextExperts experts;
  nn::Linear router;  // H -> E
  nn::GatedMLP shared_expert;
};

class Llama4TextDecoderLayer final : public DecoderLayer {
 public:
  Llama4TextDecoderLayer(const ModelConfig& c, int64_t index)
      : hidden_size_(c.hidden_size),
        self_attn(c, index, parameters_),
        feed_forward(is_moe_layer(c, index)
                         ? std::unique_ptr<nn::FeedForward>(std::make_unique<Llama4TextMoe>(c, parameters_))
                         : std::make_unique<nn::GatedMLP>("feed_forward", c.hidden_size, c.intermediate_size,
                                                          /*bias=*/false, parameters_, c.hidden_act, "activation_fn")),
        input_layernorm("input_layernorm", c.hidden_size, c.rms_norm_eps, parameters_),
        post_attention_layernorm("post_attention_layernorm", c.hidden_size, c.rms_norm_eps, parameters_),
        rotary_emb(c.head_dim),
        moe_(dynamic_cast<const Llama4TextMoe*>(feed_forward.get())) {}
  nn::PositionEmbeddings embed_positions(const Tensor& hidden) const override { return rotary_emb.forward(hidden); }
  int64_t final_norm_parameters() const override { return hidden_size_; }

  Tensor forward(const Tensor& input, const nn::PositionEmbeddings& positions) const override {
    Tensor residual = input;
    Tensor hidden_states = input_layernorm.forward(input);
    // attention_states, and a MoE layer's router_logits (its `_`), are locals until the layer returns.
    const Tensor attention_states = self_attn.forward(hidden_states, positions);
    hidden_states = ops::add(residual, attention_states);
    residual = hidden_states;
    hidden_states = post_attention_layernorm.forward(hidden_states);
    Tensor router_logits;
    if (moe_ != nullptr) {
      std::tie(hidden_states, router_logits) = moe_->forward_with_router_logits(hidden_states);
    } else {
      hidden_states = feed_forward->forward(hidden_states);
    }
    return ops::add(residual, ops::view(hidden_states, residual.sizes()));
  }

 private:
  int64_t hidden_size_;
  Llama4TextAttention self_attn;
  std::unique_ptr<nn::FeedForward> feed_forward;  // Llama4TextMoe or Llama4TextMLP
  Llama4TextRMSNorm input_layernorm;
  Llama4TextRMSNorm post_attention_layernorm;
  Llama4TextRotaryEmbedding rotary_emb;  // the model's, held here so one layer can run alone
  const Llama4TextMoe* moe_;             // feed_forward where the layer is a MoE layer, else null
};

Result<ModelConfig> read_llama4_text(const ConfigReader& r);

std::unique_ptr<DecoderLayer> build_llama4_text_layer(const ModelConfig& config, int64_t index) {
  return std::make_unique<Llama4TextDecoderLayer>(config, index);
}

std::unique_ptr<nn::Norm> build_llama4_final_norm(const ModelConfig& config, nn::ParameterList& params) {
  return std::make_unique<Llama4TextRMSNorm>("norm", config.hidden_size, config.rms_norm_eps, params);
}

// no_rope_layers (1: the layer rotates; by default 0 every no_rope_layer_interval-th layer) gives each
// layer's kind, chunked_attention (rotary) or full_attention (NoPE), which a stated layer_types must match.
Status read_llama4_layer_types(const ConfigReader& r, ModelConfig& c) {
  CENSUS_ASSIGN(const int64_t interval, r.size("no_rope_layer_interval", 4));
  std::vector<bool> use_rope;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) use_rope.push_back((i + 1) % interval != 0);
  // Llama4TextConfig reads an empty no_rope_layers as absent. Its layers index the list, so a longer one
  // runs where layer_types is stated; else layer_types is made from it, one per entry, and held to
  // num_hidden_layers.
  if (r.has("no_rope_layers") && !r.json().at("no_rope_layers").empty()) {
    CENSUS_ASSIGN(use_rope, r.layer_flags("no_rope_layers", c.num_hidden_layers,
                                          r.has("layer_types") ? PerLayer::kCut : PerLayer::kExact));
  }
  c.layer_types.clear();
  for (bool rope : use_rope) c.layer_types.push_back(rope ? "chunked_attention" : "full_attention");
  if (!r.has("layer_types")) return {};
  CENSUS_ASSIGN(const std::vector<std::string> stated,
                r.layer_kinds("layer_types", c.num_hidden_layers, {"chunked_attention", "full_attention"}));
  for (size_t i = 0; i < stated.size(); ++i)
    if (stated[i] != c.layer_types[i])
      return refuse("layer_types", "has " + shown(stated[i]) + " at layer " + std::to_string(i) + ", where no_rope_layers makes it " +
                                       c.layer_types[i] + " (chunked layers rotate, full layers do not); fix the config");
  return {};
}

// moe_layers as stated, else every interleave_moe_layer_step-th layer; the others are dense.
Status read_llama4_moe_layers(const ConfigReader& r, ModelConfig& c) {
  CENSUS_ASSIGN(const int64_t step, r.size("interleave_moe_layer_step", 1));
  std::vector<bool> moe(static_cast<size_t>(c.num_hidden_layers), false);
  if (r.has("moe_layers")) {
    CENSUS_ASSIGN(const std::vector<int64_t> listed, r.layer_indices("moe_layers", c.num_hidden_layers));
    for (int64_t i : listed) moe[static_cast<size_t>(i)] = true;
  } else {
    for (int64_t i = step - 1; i < c.num_hidden_layers; i += step) moe[static_cast<size_t>(i)] = true;
  }
  c.moe.decoder_sparse_step = 1;
  c.moe.mlp_only_layers.clear();
  for (int64_t i = 0; i < c.num_hidden_layers; ++i)
    if (!moe[static_cast<size_t>(i)]) c.moe.mlp_only_layers.push_back(i);
  return {};
}

}  // namespace

CENSUS_FAMILY(kLlama4TextFamily) = {.model_type = "llama4_text", .read = read_llama4_text, .build_layer = build_llama4_text_layer, .build_final_norm = build_llama4_final_norm, .liger_patches = true};

namespace {

// Llama4TextConfig: Llama-4-Scout's sizes by default. ModelConfig's intermediate_size is the dense
// layers' (intermediate_size_mlp); the experts and the shared expert are intermediate_size wide.
Result<ModelConfig> read_llama4_text(const ConfigReader& r) {
  CENSUS_ASSIGN(ModelConfig c, read_llama_like(r, kLlama4TextFamily, {202048, 5120, 8192, 48, 40, 8, 128}));
  CENSUS_ASSIGN(c.rms_norm_eps, r.positive_number("rms_norm_eps", 1e-5));
  CENSUS_TRY(read_attention_bias(r, c));
  CENSUS_ASSIGN(c.qk_norm, r.flag("use_qk_norm", true));
  CENSUS_ASSIGN(c.attn_temperature_tuning, r.flag("attn_temperature_tuning", true));
  CENSUS_ASSIGN(const int64_t expert_width, r.size("intermediate_size", 8192));
  CENSUS_ASSIGN(c.intermediate_size, r.size("intermediate_size_mlp", 16384));
  CENSUS_TRY(read_routed_experts(r, "num_local_experts", "num_local_experts", 16, 1, c.moe));
  c.moe.moe_intermediate_size = expert_width;
  c.moe.shared_expert_intermediate_size = expert_width;
  c.moe.shards_under_expert_parallel = false;  // Llama4TextExperts: every expert over every token
  CENSUS_TRY(read_llama4_layer_types(r, c));
  CENSUS_TRY(read_llama4_moe_layers(r, c));
  return c;
}

}  // namespace
}  // namespace census
