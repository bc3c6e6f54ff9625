// DeepSeek-V3.2 (transformers/models/deepseek_v32/modeling_deepseek_v32.py, Transformers 5): DeepSeek-V3's
// decoder layer (its dense MLP and DeepseekV3MoE, the pre-norm residual) around the sparse attention
// of deepseek_v32.h. The MTP layer (num_nextn_predict_layers) is stacked last, as DeepSeek-V3's.
#include "models/deepseek_v32.h"

#include "models/deepseek_v3.h"
#include "nn/pre_norm_layer.h"
#include "ops/ops.h"

namespace census {
namespace {

// DeepseekV32RMSNorm(q_lora_rank) and (kv_lora_rank) take the class's default eps.
constexpr double kLatentNormEps = 1e-6;

}  // namespace

DeepseekV32Attention::DeepseekV32Attention(const ModelConfig& c, bool with_indexer, bool indexer_rope_interleave,
                                           nn::ParameterList& params)
    : kernels_(c.kernels),
      mla_(c.mla),
      q_a_proj("self_attn.q_a_proj", c.hidden_size, c.mla.q_lora_rank, c.qkv_bias, params),
      q_a_layernorm("self_attn.q_a_layernorm", c.mla.q_lora_rank, kLatentNormEps, params),
      q_b_proj("self_attn.q_b_proj", c.mla.q_lora_rank,
               c.num_attention_heads * (c.mla.qk_nope_head_dim + c.mla.qk_rope_head_dim), false, params),
      kv_a_proj_with_mqa("self_attn.kv_a_proj_with_mqa", c.hidden_size, c.mla.kv_lora_rank + c.mla.qk_rope_head_dim,
                         c.qkv_bias, params),
      kv_a_layernorm("self_attn.kv_a_layernorm", c.mla.kv_lora_rank, kLatentNormEps, params),
      kv_b_proj("self_attn.kv_b_proj", c.mla.kv_lora_rank,
                c.num_attention_heads * (c.mla.qk_nope_head_dim + c.mla.v_head_dim), false, params),
      o_proj("self_attn.o_proj", c.num_attention_heads * c.mla.v_head_dim, c.hidden_size, c.o_bias, params) {
  if (with_indexer)
    indexer.emplace("self_attn.indexer",
                    nn::IndexerSizes{c.hidden_size, c.mla.q_lora_rank, c.index_n_heads, c.index_head_dim,
                                     c.mla.qk_rope_head_dim, c.index_topk, indexer_rope_interleave},
                    params);
}

// Locals in the order Python binds them, so that what nothing saves is freed in PyTorch's order.
std::pair<Tensor, Tensor> DeepseekV32Attention::forward(const Tensor& hidden_states, const nn::PositionEmbeddings& positions,
                                                        const Tensor& earlier_topk) const {
  ModuleScope scope(path_, ModuleKind::kOther);
  const int64_t batch = hidden_states.size(0), seq = hidden_states.size(1);
  const int64_t qk_head_dim = mla_.qk_nope_head_dim + mla_.qk_rope_head_dim;

  Tensor q_resid = q_a_layernorm.forward(q_a_proj.forward(hidden_states));
  Tensor q_states = q_b_proj.forward(q_resid);
  q_states = ops::transpose(ops::view(q_states, Dims{batch, seq, q_states.size(-1) / qk_head_dim, qk_head_dim}), 1, 2);
  Tensor q_pass, q_rot;
  {
    std::vector<Tensor> parts = ops::split_with_sizes(q_states, {mla_.qk_nope_head_dim, mla_.qk_rope_head_dim}, -1);
    q_pass = parts[0];
    q_rot = parts[1];
  }
  Tensor compressed_kv = kv_a_proj_with_mqa.forward(hidden_states);
  Tensor kv_pass, k_rot;
  {
    std::vector<Tensor> parts = ops::split_with_sizes(compressed_kv, {mla_.kv_lora_rank, mla_.qk_rope_head_dim}, -1);
    kv_pass = parts[0];
    k_rot = parts[1];
  }
  Tensor k_pass = ops::view(kv_a_layernorm.forward(kv_pass), Dims{batch, 1, seq, mla_.kv_lora_rank});
  k_rot = ops::view(k_rot, Dims{batch, 1, seq, mla_.qk_rope_head_dim});
  {
    auto [q_embed, k_embed] = nn::apply_rotary_pos_emb_interleave(q_rot, k_rot, positions.cos, positions.sin);
    q_rot = q_embed;
    k_rot = k_embed;
  }
  Tensor query_states = ops::cat({q_pass, q_rot}, -1);
  auto [key_states, value_states] = expand_kv(k_pass, k_rot);

  Tensor topk_indices = indexer ? indexer->forward(hidden_states, q_resid, positions) : earlier_topk;
  // The flash path hands the indices to the kernel (sparse_indices); the contract takes none.
  Tensor attn_output = nn::flash_attention_forward(query_states, key_states, value_states, kernels_);
  attn_output = ops::contiguous(ops::reshape(attn_output, Dims{batch, seq, attn_output.size(2) * attn_output.size(3)}));
  attn_output = o_proj.forward(attn_output);
  return {attn_output, topk_indices};
}

std::pair<Tensor, Tensor> DeepseekV32Attention::expand_kv(const Tensor& latent, const Tensor& rotary_key) const {
  const int64_t batch = latent.size(0), seq = latent.size(2);
  const int64_t width = mla_.qk_nope_head_dim + mla_.v_head_dim;
  Tensor kv_nope = kv_b_proj.forward(latent);
  kv_nope = ops::transpose(ops::view(kv_nope, Dims{batch, seq, kv_nope.size(-1) / width, width}), 1, 2);
  Tensor k_nope, value_states;
  {
    std::vector<Tensor> parts = ops::split_with_sizes(kv_nope, {mla_.qk_nope_head_dim, mla_.v_head_dim}, -1);
    k_nope = parts[0];
    value_states = parts[1];
  }
  const int64_t heads = k_nope.size(1);
  Tensor k_rot = ops::expand(rotary_key, Dims{batch, heads, seq, mla_.qk_rope_head_dim});
  Tensor key_states = ops::new_empty(kv_nope, Dims{batch, heads, seq, mla_.qk_nope_head_dim + mla_.qk_rope_head_dim});
  ops::assign_index(key_states, {ops::IndexStep{false, 3, 0, mla_.qk_nope_head_dim}}, k_nope);
  ops::assign_index(key_states, {ops::IndexStep{false, 3, mla_.qk_nope_head_dim, key_states.size(-1)}}, k_rot);
  return {key_states, value_states};
}

Result<ModelConfig> read_deepseek_v32_config(const ConfigReader& r, const Family& family) {
  CENSUS_ASSIGN(ModelConfig c, read_deepseek_v3_config(r, family));
  if (c.mla.q_lora_rank == 0)
    return refuse("q_lora_rank", "is null, but the indexer reads the attention's q_a_layernorm output; state a rank");
  CENSUS_ASSIGN(c.index_n_heads, r.size("index_n_heads", 64));
  CENSUS_ASSIGN(c.index_head_dim, r.size("index_head_dim", 128));
  CENSUS_ASSIGN(c.index_topk, r.size("index_topk", 2048));
  if (c.index_head_dim < c.mla.qk_rope_head_dim)
    return refuse("index_head_dim", std::to_string(c.index_head_dim) + " is narrower than qk_rope_head_dim " +
                                        std::to_string(c.mla.qk_rope_head_dim) + ", which its rotary takes; fix the config");
  c.mla.rope_interleave = true;  // the attention rotates interleaved pairs whatever rope_interleave says
  // layer_types picks each layer's mask, and the model builds only deepseek_sparse_attention's: any other
  // kind, or a list of the wrong length, is a config the model cannot run.
  if (r.has("layer_types"))
    CENSUS_TRY(r.layer_kinds("layer_types", c.num_hidden_layers, {"deepseek_sparse_attention"}));
  if (r.has("mlp_layer_types")) {
    CENSUS_ASSIGN(const std::vector<std::string> types,
                  r.layer_kinds("mlp_layer_types", c.num_hidden_layers, {"dense", "sparse"}));
    // Dense layers by name, wherever they are: none by position.
    c.moe.first_k_dense_replace = 0;
    c.moe.mlp_only_layers.clear();
    for (size_t i = 0; i < types.size(); ++i)
      if (types[i] == "dense") c.moe.mlp_only_layers.push_back(static_cast<int64_t>(i));
  }
  return c;
}

std::unique_ptr<nn::FeedForward> build_deepseek_v32_mlp(const ModelConfig& c, int64_t index, nn::ParameterList& params) {
  if (!is_moe_layer(c, index)) return build_dense_mlp(c, index, params);
  nn::GroupLimitedRouting routing = group_limited_routing(c.moe);
  routing.correction_bias_dtype = DType::kFloat32;
  return std::make_unique<nn::DeepseekV3MoE>(
      "mlp", routing,
      nn::DeepseekV3MoE::Sizes{c.hidden_size, c.moe.moe_intermediate_size,
                               c.moe.moe_intermediate_size * c.moe.n_shared_experts, c.hidden_act,
                               c.moe.experts_implementation, c.moe.expert_parallel},
      params);
}

namespace {

class DeepseekV32DecoderLayer final : public DecoderLayer {
 public:
  DeepseekV32DecoderLayer(const ModelConfig& c, int64_t index)
      : hidden_size_(c.hidden_size),
        self_attn(c, /*indexer=*/true, /*indexer_rope_interleave=*/false, parameters_),
        mlp(build_deepseek_v32_mlp(c, index, parameters_)),
        input_layernorm("input_layernorm", c.hidden_size, c.rms_norm_eps, parameters_),
        post_attention_layernorm("post_attention_layernorm", c.hidden_size, c.rms_norm_eps, parameters_),
        rotary_emb(c.mla.qk_rope_head_dim) {}
  nn::PositionEmbeddings embed_positions(const Tensor& hidden) const override { return rotary_emb.forward(hidden); }
  Tensor forward(const Tensor& input, const nn::PositionEmbeddings& positions) const override {
    return nn::pre_norm_layer_forward(
        input, input_layernorm, [&](const Tensor& normed) { return self_attn.forward(normed, positions).first; },
        post_attention_layernorm, *mlp);
  }
  int64_t final_norm_parameters() const override { return hidden_size_; }

  std::vector<Tensor> registered_buffers() const override { return mlp->buffers(); }

 private:
  int64_t hidden_size_;
  DeepseekV32Attention self_attn;
  std::unique_ptr<nn::FeedForward> mlp;
  nn::LlamaRMSNorm input_layernorm;
  nn::LlamaRMSNorm post_attention_layernorm;
  nn::RotaryEmbedding rotary_emb;  // Dr wide
};

Result<ModelConfig> read_deepseek_v32(const ConfigReader& r);

std::unique_ptr<DecoderLayer> build_deepseek_v32_layer(const ModelConfig& config, int64_t index) {
  return std::make_unique<DeepseekV32DecoderLayer>(config, index);
}

}  // namespace

CENSUS_FAMILY(kDeepseekV32Family) = {"deepseek_v32", read_deepseek_v32, build_deepseek_v32_layer, build_llama_final_norm};

namespace {

Result<ModelConfig> read_deepseek_v32(const ConfigReader& r) { return read_deepseek_v32_config(r, kDeepseekV32Family); }

}  // namespace

}  // namespace census
