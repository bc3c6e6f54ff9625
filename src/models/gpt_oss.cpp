#include "models/gpt_oss.h"

#include "models/llama.h"
#include "models/moe_layers.h"
#include "nn/attention_kernel.h"
#include "nn/pre_norm_layer.h"
#include "ops/ops.h"

namespace census {

GptOssAttention::GptOssAttention(const ModelConfig& c, nn::ParameterList& params)
    : kernels_(c.kernels),
      head_dim_(c.head_dim),
      q_proj("self_attn.q_proj", c.hidden_size, c.num_attention_heads * c.head_dim, c.qkv_bias, params),
      k_proj("self_attn.k_proj", c.hidden_size, c.num_key_value_heads * c.head_dim, c.qkv_bias, params),
      v_proj("self_attn.v_proj", c.hidden_size, c.num_key_value_heads * c.head_dim, c.qkv_bias, params),
      o_proj("self_attn.o_proj", c.num_attention_heads * c.head_dim, c.hidden_size, c.o_bias, params),
      sinks_(nn::register_parameter(params, path_, "sinks", Dims{c.num_attention_heads})) {}

Tensor GptOssAttention::forward(const Tensor& hidden_states, const nn::PositionEmbeddings& positions) const {
  ModuleScope scope(path_, ModuleKind::kOther);
  const int64_t batch = hidden_states.size(0), seq = hidden_states.size(1);
  auto heads = [&](const nn::Linear& proj) {
    Tensor states = proj.forward(hidden_states);  // (1, S, N*D)
    return ops::transpose(ops::view(states, Dims{batch, seq, states.size(-1) / head_dim_, head_dim_}), 1, 2);
  };
  Tensor query_states = heads(q_proj);  // (1, Nh, S, D)
  Tensor key_states = heads(k_proj);    // (1, Nkv, S, D)
  Tensor value_states = heads(v_proj);
  {
    auto [q_embed, k_embed] = nn::apply_rotary_pos_emb_halves(query_states, key_states, positions.cos, positions.sin);
    query_states = q_embed;  // the projections' outputs, which the rotary keeps none of, go here
    key_states = k_embed;
  }
  // The sinks enter the kernel's softmax; the contract's saves and FLOPs are the flash kernel's.
  Tensor attn_output = nn::flash_attention_forward(query_states, key_states, value_states, kernels_);  // (1, S, Nh, D)
  attn_output = ops::contiguous(ops::reshape(attn_output, Dims{batch, seq, attn_output.size(2) * attn_output.size(3)}));
  return o_proj.forward(attn_output);
}

GptOssTopKRouter::GptOssTopKRouter(const ModelConfig& c, nn::ParameterList& params)
    : top_k_(c.moe.num_experts_per_tok),
      weight_(nn::register_parameter(params, path_, "weight", Dims{c.moe.num_experts, c.hidden_size})),
      bias_(nn::register_parameter(params, path_, "bias", Dims{c.moe.num_experts})) {}

nn::Routing GptOssTopKRouter::forward(const Tensor& hidden_states) const {
  ModuleScope scope(path_, ModuleKind::kOther);
  Tensor router_logits = ops::linear(hidden_states, weight_, bias_);  // (T, E), addmm
  auto [router_top_value, router_indices] = ops::topk(router_logits, top_k_);
  // Already in its own dtype: no copy before the softmax. The top-k values are dropped at return.
  Tensor router_scores = ops::softmax(router_top_value, -1, std::nullopt);
  return {std::move(router_logits), std::move(router_scores), std::move(router_indices)};
}

GptOssMLP::GptOssMLP(const ModelConfig& c, nn::ParameterList& params)
    : router(c, params),
      // Under expert parallelism the rank holds its share of the experts; the router picks among all.
      experts("mlp.experts", c.moe.num_experts / c.moe.expert_parallel, c.hidden_size, c.intermediate_size, c.hidden_act,
              c.moe.experts_implementation, params,
              nn::ExpertsLayout{/*transposed=*/true, /*has_bias=*/true, /*gpt_oss_gate=*/true}) {}

Tensor GptOssMLP::forward(const Tensor& input) const {
  ModuleScope scope(path_, ModuleKind::kOther);
  const Dims shape = input.sizes();
  Tensor hidden_states = ops::reshape(input, Dims{shape[0] * shape[1], shape[2]});
  // The block returns the router's scores too; the layer drops them (softmax keeps its own).
  const nn::Routing routing = router.forward(hidden_states);
  hidden_states = experts.forward(hidden_states, routing.indices, routing.weights);
  return ops::reshape(hidden_states, shape);
}

GptOssDecoderLayer::GptOssDecoderLayer(const ModelConfig& c)
    : hidden_size_(c.hidden_size),
      self_attn(c, parameters_),
      mlp(c, parameters_),
      input_layernorm("input_layernorm", c.hidden_size, c.rms_norm_eps, parameters_),
      post_attention_layernorm("post_attention_layernorm", c.hidden_size, c.rms_norm_eps, parameters_),
      rotary_emb(c.head_dim, /*halves=*/true) {}

Tensor GptOssDecoderLayer::forward(const Tensor& input, const nn::PositionEmbeddings& positions) const {
  return nn::pre_norm_layer_forward(
      input, input_layernorm, [&](const Tensor& normed) { return self_attn.forward(normed, positions); }, post_attention_layernorm, mlp);
}

namespace {
Result<ModelConfig> read_gpt_oss(const ConfigReader& r);
}  // namespace

std::unique_ptr<DecoderLayer> build_gpt_oss_layer(const ModelConfig& config, int64_t /*index*/) {
  return std::make_unique<GptOssDecoderLayer>(config);
}

std::unique_ptr<nn::Norm> build_gpt_oss_final_norm(const ModelConfig& config, nn::ParameterList& params) {
  return std::make_unique<nn::GptOssRMSNorm>("norm", config.hidden_size, config.rms_norm_eps, params);
}

CENSUS_FAMILY(kGptOssFamily) = {.model_type = "gpt_oss", .read = read_gpt_oss, .build_layer = build_gpt_oss_layer, .build_final_norm = build_gpt_oss_final_norm, .liger_patches = true,
                              .peft_lora = true, .bnb_4bit = true};

namespace {

// GptOssConfig: every layer MoE, the experts intermediate_size wide; attention_bias (default true)
// biases q, k, v and o; layer_types alternate sliding and full from a sliding first layer.
Result<ModelConfig> read_gpt_oss(const ConfigReader& r) {
  auto c = read_llama_like(r, kGptOssFamily, {201088, 2880, 2880, 36, 64, 8, 64});
  CENSUS_TRY(c);
  auto eps = r.positive_number("rms_norm_eps", 1e-5);
  CENSUS_TRY(eps);
  auto attention_bias = r.flag("attention_bias", true);
  CENSUS_TRY(attention_bias);
  c->rms_norm_eps = *eps;
  c->qkv_bias = c->o_bias = *attention_bias;
  CENSUS_TRY(read_routed_experts(r, "num_local_experts", "num_experts", 128, 4, c->moe));
  c->layer_types.clear();
  for (int64_t i = 0; i < c->num_hidden_layers; ++i)
    c->layer_types.push_back((i + 1) % 2 != 0 ? "sliding_attention" : "full_attention");
  CENSUS_TRY(read_stated_layer_types(r, *c));
  return c;
}

}  // namespace
}  // namespace census
