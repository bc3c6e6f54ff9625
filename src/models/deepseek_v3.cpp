#include "models/deepseek_v3.h"

#include "models/llama.h"
#include "models/moe_families.h"
#include "nn/attention_kernel.h"
#include "models/pre_norm_layer.h"
#include "ops/ops.h"

namespace census {
namespace {

template <class Module, class... Args>
std::optional<Module> built_if(bool condition, Args&&... args) {
  if (!condition) return std::nullopt;
  return std::optional<Module>(std::in_place, std::forward<Args>(args)...);
}

// DeepseekV3RMSNorm(q_lora_rank) and (kv_lora_rank) take the class's default eps, not rms_norm_eps.
constexpr double kLatentNormEps = 1e-6;

}  // namespace

DeepseekV3Attention::DeepseekV3Attention(const ModelConfig& c, nn::ParameterList& params)
    : kernels_(c.kernels),
      mla_(c.mla),
      q_proj(built_if<nn::Linear>(c.mla.q_lora_rank == 0, "self_attn.q_proj", c.hidden_size,
                                  c.num_attention_heads * (c.mla.qk_nope_head_dim + c.mla.qk_rope_head_dim), false,
                                  params)),
      q_a_proj(built_if<nn::Linear>(c.mla.q_lora_rank > 0, "self_attn.q_a_proj", c.hidden_size, c.mla.q_lora_rank,
                                    c.qkv_bias, params)),
      q_a_layernorm(built_if<nn::LlamaRMSNorm>(c.mla.q_lora_rank > 0, "self_attn.q_a_layernorm", c.mla.q_lora_rank,
                                               kLatentNormEps, params)),
      q_b_proj(built_if<nn::Linear>(c.mla.q_lora_rank > 0, "self_attn.q_b_proj", c.mla.q_lora_rank,
                                    c.num_attention_heads * (c.mla.qk_nope_head_dim + c.mla.qk_rope_head_dim), false,
                                    params)),
      kv_a_proj_with_mqa("self_attn.kv_a_proj_with_mqa", c.hidden_size, c.mla.kv_lora_rank + c.mla.qk_rope_head_dim,
                         c.qkv_bias, params),
      kv_a_layernorm("self_attn.kv_a_layernorm", c.mla.kv_lora_rank, kLatentNormEps, params),
      kv_b_proj("self_attn.kv_b_proj", c.mla.kv_lora_rank,
                c.num_attention_heads * (c.mla.qk_nope_head_dim + c.mla.v_head_dim), false, params),
      o_proj("self_attn.o_proj", c.num_attention_heads * c.mla.v_head_dim, c.hidden_size, c.o_bias, params) {}

// Locals are declared in the order Python binds them: at return C++ drops them in the order the
// interpreter clears the frame, so the storages nothing saved are freed in PyTorch's order.
Tensor DeepseekV3Attention::forward(const Tensor& hidden_states, const nn::PositionEmbeddings& positions) const {
  ModuleScope scope(path_, ModuleKind::kOther);
  const int64_t batch = hidden_states.size(0), seq = hidden_states.size(1);
  const int64_t qk_head_dim = mla_.qk_nope_head_dim + mla_.qk_rope_head_dim;

  Tensor q_states = q_proj ? q_proj->forward(hidden_states)
                           : q_b_proj->forward(q_a_layernorm->forward(q_a_proj->forward(hidden_states)));
  q_states = ops::transpose(ops::view(q_states, Dims{batch, seq, q_states.size(-1) / qk_head_dim, qk_head_dim}), 1, 2);
  Tensor q_pass, q_rot;  // (B, N, S, Dn), (B, N, S, Dr): views of q_states
  {
    std::vector<Tensor> parts = ops::split_with_sizes(q_states, {mla_.qk_nope_head_dim, mla_.qk_rope_head_dim}, -1);
    q_pass = parts[0];
    q_rot = parts[1];
  }
  Tensor compressed_kv = kv_a_proj_with_mqa.forward(hidden_states);  // (B, S, Rkv + Dr)
  Tensor kv_nope, k_rot;
  {
    std::vector<Tensor> parts = ops::split_with_sizes(compressed_kv, {mla_.kv_lora_rank, mla_.qk_rope_head_dim}, -1);
    kv_nope = parts[0];
    k_rot = parts[1];
  }
  kv_nope = kv_a_layernorm.forward(kv_nope);  // its fp32 upcast copies the strided slice
  kv_nope = ops::view(kv_nope, Dims{batch, 1, seq, mla_.kv_lora_rank});
  k_rot = ops::view(k_rot, Dims{batch, 1, seq, mla_.qk_rope_head_dim});

  {
    auto [q_embed, k_embed] = mla_.rope_interleave
                                  ? nn::apply_rotary_pos_emb_interleave(q_rot, k_rot, positions.cos, positions.sin)
                                  : nn::apply_rotary_pos_emb(q_rot, k_rot, positions.cos, positions.sin);
    q_rot = q_embed;
    k_rot = k_embed;
  }

  Tensor query_states = ops::cat({q_pass, q_rot}, -1);  // (B, N, S, Dqk)
  auto [key_states, value_states] = expand_kv(kv_nope, k_rot);

  // The kernel takes values of their own width (Dv); its output is (B, S, N, Dv).
  Tensor attn_output = nn::flash_attention_forward(query_states, key_states, value_states, kernels_);
  attn_output = ops::contiguous(ops::reshape(attn_output, Dims{batch, seq, attn_output.size(2) * attn_output.size(3)}));
  attn_output = o_proj.forward(attn_output);
  return attn_output;
}

std::pair<Tensor, Tensor> DeepseekV3Attention::expand_kv(const Tensor& latent, const Tensor& rotary_key) const {
  const int64_t batch = latent.size(0), seq = latent.size(2);
  const int64_t width = mla_.qk_nope_head_dim + mla_.v_head_dim;
  Tensor kv_nope = kv_b_proj.forward(latent);  // (B, 1, S, N*(Dn + Dv))
  kv_nope = ops::transpose(ops::view(kv_nope, Dims{batch, seq, kv_nope.size(-1) / width, width}), 1, 2);
  Tensor k_nope, value_states;
  {
    std::vector<Tensor> parts = ops::split_with_sizes(kv_nope, {mla_.qk_nope_head_dim, mla_.v_head_dim}, -1);
    k_nope = parts[0];
    value_states = parts[1];
  }
  const int64_t heads = k_nope.size(1);
  Tensor k_rot = ops::expand(rotary_key, Dims{batch, heads, seq, mla_.qk_rope_head_dim});  // no storage
  // new_empty, then key_states[..., :Dn].copy_(k_nope) and key_states[..., Dn:].copy_(k_rot): the
  // key's history is two CopySlices (Note [Indexed assignment]).
  Tensor key_states = ops::new_empty(kv_nope, Dims{batch, heads, seq, mla_.qk_nope_head_dim + mla_.qk_rope_head_dim});
  ops::assign_index(key_states, {ops::IndexStep{false, 3, 0, mla_.qk_nope_head_dim}}, k_nope);
  ops::assign_index(key_states, {ops::IndexStep{false, 3, mla_.qk_nope_head_dim, key_states.size(-1)}}, k_rot);
  return {key_states, value_states};
}

DeepseekV3TopkRouter::DeepseekV3TopkRouter(const ModelConfig& c, nn::ParameterList& params)
    : moe_(c.moe),
      weight_(nn::register_parameter(params, path_, "weight", Dims{c.moe.num_experts, c.hidden_size})),
      // A buffer made as the layer is built, in the default dtype (bf16): the layer the reference census
      // builds. A checkpoint loaded with _keep_in_fp32_modules_strict holds it in fp32, which changes the
      // router's traffic by 2 bytes an expert and nothing else (the sum with the fp32 scores is fp32).
      e_score_correction_bias_(make_tensor(Dims{c.moe.num_experts}, DType::kBFloat16)) {}

nn::Routing DeepseekV3TopkRouter::forward(const Tensor& input) const {
  ModuleScope scope(path_, ModuleKind::kOther);
  const int64_t experts = moe_.num_experts, groups = moe_.n_group;
  const Tensor hidden_states = ops::view(input, Dims{input.numel() / input.size(-1), input.size(-1)});
  const int64_t tokens = hidden_states.size(0);
  Tensor router_logits;
  {
    // x.type(float32), then the weight's: two fp32 copies the linear keeps.
    const Tensor x = ops::to(hidden_states, DType::kFloat32);
    const Tensor weight = ops::to(weight_, DType::kFloat32);
    router_logits = ops::linear(x, weight);  // (T, E) fp32
  }
  const Tensor scores = ops::sigmoid(router_logits);
  Tensor scores_for_choice = ops::add(scores, e_score_correction_bias_);
  // Each group scored by the sum of its two best experts; the graph of these selections reaches no
  // loss, and is freed with its locals as the router returns.
  const Tensor group_scores = ops::sum(ops::topk(ops::view(scores_for_choice, Dims{tokens, groups, experts / groups}), 2).values, {2}, false);
  const Tensor group_idx = ops::topk(group_scores, moe_.topk_group).indices;
  Tensor group_mask = ops::zeros_like(group_scores);
  ops::scatter_(group_mask, 1, group_idx, 1.0);
  const Tensor score_mask = ops::reshape(
      ops::expand(ops::unsqueeze(group_mask, -1), Dims{tokens, groups, experts / groups}), Dims{tokens, experts});
  // masked_fill(~score_mask.bool(), -inf): the groups not chosen leave their experts out.
  scores_for_choice = ops::masked_fill(scores_for_choice, ops::bitwise_not(ops::to(score_mask, DType::kBool)));
  Tensor topk_indices = ops::topk(scores_for_choice, moe_.num_experts_per_tok).indices;
  Tensor topk_weights = ops::gather(scores, 1, topk_indices);  // (T, K) fp32
  Tensor denominator;
  if (moe_.norm_topk_prob) {
    denominator = ops::add(ops::sum(topk_weights, {1}, true), 1e-20);
    ops::div_(topk_weights, denominator);
  }
  topk_weights = ops::mul_number(topk_weights, moe_.routed_scaling_factor);
  return {std::move(router_logits), std::move(topk_weights), std::move(topk_indices)};
}

DeepseekV3MoE::DeepseekV3MoE(const ModelConfig& c, nn::ParameterList& params)
    : experts("mlp.experts", c.moe.num_experts, c.hidden_size, c.moe.moe_intermediate_size, c.hidden_act,
              c.moe.experts_implementation, params),
      gate(c, params),
      shared_experts("mlp.shared_experts", c.hidden_size, c.moe.moe_intermediate_size * c.moe.n_shared_experts, false,
                     params, c.hidden_act) {}

Tensor DeepseekV3MoE::forward(const Tensor& input) const {
  ModuleScope scope(path_, ModuleKind::kOther);
  const Tensor residuals = input;
  const Dims orig_shape = input.sizes();
  const nn::Routing routing = gate.forward(input);
  Tensor hidden_states = ops::view(input, Dims{orig_shape[0] * orig_shape[1], orig_shape[2]});
  hidden_states = ops::view(experts.forward(hidden_states, routing.indices, routing.weights), orig_shape);
  {
    // The shared experts' output is a temporary, gone before hidden_states is rebound.
    Tensor sum = ops::add(hidden_states, shared_experts.forward(residuals));
    hidden_states = sum;
  }
  return hidden_states;
}

DeepseekV3DecoderLayer::DeepseekV3DecoderLayer(const ModelConfig& c, int64_t index)
    : hidden_size_(c.hidden_size),
      self_attn(c, parameters_),
      mlp(is_moe_layer(c, index) ? std::unique_ptr<nn::FeedForward>(std::make_unique<DeepseekV3MoE>(c, parameters_))
                                 : std::make_unique<nn::GatedMLP>("mlp", c.hidden_size, c.intermediate_size, false,
                                                                  parameters_, c.hidden_act)),
      input_layernorm("input_layernorm", c.hidden_size, c.rms_norm_eps, parameters_),
      post_attention_layernorm("post_attention_layernorm", c.hidden_size, c.rms_norm_eps, parameters_),
      rotary_emb(c.mla.qk_rope_head_dim) {}

Tensor DeepseekV3DecoderLayer::forward(const Tensor& input, const nn::PositionEmbeddings& positions) const {
  return pre_norm_layer_forward(
      input, input_layernorm, [&](const Tensor& normed) { return self_attn.forward(normed, positions); }, post_attention_layernorm, *mlp);
}

// DeepseekV3Config: MLA sizes; q_lora_rank null for a plain q_proj; head_dim is qk_rope_head_dim (the
// rotary's width); n_routed_experts experts in n_group groups, of which topk_group bound the choice.
Result<ModelConfig> read_deepseek_v3(const ConfigReader& r, const Family& family) {
  auto rope_dim = r.size("qk_rope_head_dim", 64);
  CENSUS_TRY(rope_dim);
  auto c = read_llama_like(r, family, {129280, 7168, 18432, 61, 128, std::nullopt, *rope_dim});
  CENSUS_TRY(c);
  MlaConfig& mla = c->mla;
  mla.qk_rope_head_dim = *rope_dim;
  // q_lora_rank: absent takes the default; null (stated) is a plain q_proj.
  const bool plain_q = r.json().contains("q_lora_rank") && r.json().at("q_lora_rank").is_null();
  auto q_rank = r.size("q_lora_rank", 1536);
  CENSUS_TRY(q_rank);
  mla.q_lora_rank = plain_q ? 0 : *q_rank;
  auto kv_rank = r.size("kv_lora_rank", 512);
  CENSUS_TRY(kv_rank);
  auto nope_dim = r.size("qk_nope_head_dim", 128);
  CENSUS_TRY(nope_dim);
  auto v_dim = r.size("v_head_dim", 128);
  CENSUS_TRY(v_dim);
  auto interleave = r.flag("rope_interleave", true);
  CENSUS_TRY(interleave);
  mla.kv_lora_rank = *kv_rank;
  mla.qk_nope_head_dim = *nope_dim;
  mla.v_head_dim = *v_dim;
  mla.rope_interleave = *interleave;
  auto attention_bias = r.flag("attention_bias", false);
  CENSUS_TRY(attention_bias);
  c->qkv_bias = c->o_bias = *attention_bias;  // q_a_proj, kv_a_proj_with_mqa and o_proj

  MoeConfig& moe = c->moe;
  moe.block = MoeConfig::Block::kDeepseekV3;
  CENSUS_TRY(read_routed_experts(r, "n_routed_experts", "num_local_experts", 256, 8, moe));
  auto width = r.size("moe_intermediate_size", 2048);
  CENSUS_TRY(width);
  auto shared = r.size("n_shared_experts", 1);
  CENSUS_TRY(shared);
  auto dense = r.count("first_k_dense_replace", 3);
  CENSUS_TRY(dense);
  auto groups = r.size("n_group", 8);
  CENSUS_TRY(groups);
  auto top_groups = r.size("topk_group", 4);
  CENSUS_TRY(top_groups);
  auto scaling = r.positive_number("routed_scaling_factor", 2.5);
  CENSUS_TRY(scaling);
  auto norm = r.flag("norm_topk_prob", true);
  CENSUS_TRY(norm);
  auto mtp = r.count("num_nextn_predict_layers", 1);
  CENSUS_TRY(mtp);
  if (moe.num_experts % *groups != 0)
    return refuse("n_group", std::to_string(*groups) + " groups do not divide the " + std::to_string(moe.num_experts) +
                                 " routed experts; group-limited routing needs equal groups");
  if (moe.num_experts / *groups < 2)
    return refuse("n_group", std::to_string(*groups) + " groups of " + std::to_string(moe.num_experts / *groups) +
                                 " expert leave no two experts to score a group by; use fewer groups");
  if (*top_groups > *groups)
    return refuse("topk_group", std::to_string(*top_groups) + " exceeds the " + std::to_string(*groups) +
                                    " groups (n_group); fix the config");
  if (moe.num_experts_per_tok > *top_groups * (moe.num_experts / *groups))
    return refuse("num_experts_per_tok", std::to_string(moe.num_experts_per_tok) + " exceeds the experts of the " +
                                             std::to_string(*top_groups) + " groups a token may route to; fix the config");
  moe.moe_intermediate_size = *width;
  moe.n_shared_experts = *shared;
  moe.first_k_dense_replace = std::min(*dense, c->num_hidden_layers);
  moe.n_group = *groups;
  moe.topk_group = *top_groups;
  moe.routed_scaling_factor = *scaling;
  moe.norm_topk_prob = *norm;
  c->num_mtp_layers = *mtp;
  return c;
}

std::unique_ptr<DecoderLayer> build_deepseek_v3_layer(const ModelConfig& config, int64_t index) {
  return std::make_unique<DeepseekV3DecoderLayer>(config, index);
}

}  // namespace census
