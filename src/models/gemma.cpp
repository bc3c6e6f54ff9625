#include "models/gemma.h"

#include "models/llama.h"
#include "nn/attention_kernel.h"
#include "ops/ops.h"

namespace census {

int64_t liger_norm_sm_count(const ModelConfig& c) { return c.liger.rms_norm ? c.liger.sm_count : 0; }

bool liger_norm_in_place(const ModelConfig& c) { return c.model_type == "gemma"; }

GemmaAttention::GemmaAttention(const ModelConfig& c, nn::ParameterList& params)
    : kernels_(c.kernels),
      liger_rope_(c.liger.rope),
      head_dim_(c.head_dim),
      q_proj("self_attn.q_proj", c.hidden_size, c.num_attention_heads * c.head_dim, c.qkv_bias, params),
      k_proj("self_attn.k_proj", c.hidden_size, c.num_key_value_heads * c.head_dim, c.qkv_bias, params),
      v_proj("self_attn.v_proj", c.hidden_size, c.num_key_value_heads * c.head_dim, c.qkv_bias, params),
      o_proj("self_attn.o_proj", c.num_attention_heads * c.head_dim, c.hidden_size, c.o_bias, params) {
  if (c.qk_norm) {
    q_norm.emplace("self_attn.q_norm", c.head_dim, c.rms_norm_eps, params, liger_norm_sm_count(c), liger_norm_in_place(c));
    k_norm.emplace("self_attn.k_norm", c.head_dim, c.rms_norm_eps, params, liger_norm_sm_count(c), liger_norm_in_place(c));
  }
}

Tensor GemmaAttention::forward(const Tensor& hidden_states, const nn::PositionEmbeddings& positions) const {
  ModuleScope scope(path_, ModuleKind::kOther);
  const int64_t batch = hidden_states.size(0), seq = hidden_states.size(1);
  auto heads = [&](const nn::Linear& proj) {
    Tensor states = proj.forward(hidden_states);  // (1, S, N*D)
    return ops::transpose(ops::view(states, Dims{batch, seq, states.size(-1) / head_dim_, head_dim_}), 1, 2);
  };
  Tensor query_states = heads(q_proj);  // (1, Nh, S, D)
  Tensor key_states = heads(k_proj);    // (1, Nkv, S, D)
  Tensor value_states = heads(v_proj);
  if (q_norm) query_states = q_norm->forward(query_states);  // on the transposed, non-contiguous heads
  if (k_norm) key_states = k_norm->forward(key_states);
  auto [q_embed, k_embed] = liger_rope_ ? ops::liger_rope(query_states, key_states, positions.cos, positions.sin)
                                        : nn::apply_rotary_pos_emb(query_states, key_states, positions.cos, positions.sin);
  query_states = q_embed;
  key_states = k_embed;
  Tensor attn_output = nn::flash_attention_forward(query_states, key_states, value_states, kernels_);  // (1, S, Nh, D)
  attn_output = ops::contiguous(ops::reshape(attn_output, Dims{batch, seq, attn_output.size(2) * attn_output.size(3)}));
  return o_proj.forward(attn_output);
}

GemmaDecoderLayer::GemmaDecoderLayer(const ModelConfig& c, bool sandwich)
    : hidden_size_(c.hidden_size),
      sandwich_(sandwich),
      self_attn(c, parameters_),
      mlp("mlp", c.hidden_size, c.intermediate_size, /*bias=*/false, parameters_, c.hidden_act, "act_fn",
          c.liger.swiglu ? nn::LigerMul::kGELU : nn::LigerMul::kNone),
      input_layernorm("input_layernorm", c.hidden_size, c.rms_norm_eps, parameters_, liger_norm_sm_count(c),
                      liger_norm_in_place(c)),
      post_attention_layernorm("post_attention_layernorm", c.hidden_size, c.rms_norm_eps, parameters_,
                               liger_norm_sm_count(c), liger_norm_in_place(c)),
      rotary_emb(c.head_dim) {
  if (sandwich_) {
    pre_feedforward_layernorm.emplace("pre_feedforward_layernorm", c.hidden_size, c.rms_norm_eps, parameters_,
                                      liger_norm_sm_count(c), liger_norm_in_place(c));
    post_feedforward_layernorm.emplace("post_feedforward_layernorm", c.hidden_size, c.rms_norm_eps, parameters_,
                                       liger_norm_sm_count(c), liger_norm_in_place(c));
  }
}

Tensor GemmaDecoderLayer::forward(const Tensor& input, const nn::PositionEmbeddings& positions) const {
  Tensor residual = input;
  Tensor hidden_states = input_layernorm.forward(input);
  hidden_states = self_attn.forward(hidden_states, positions);
  if (!sandwich_) {  // Gemma: as Llama
    hidden_states = ops::add(residual, hidden_states);
    residual = hidden_states;
    hidden_states = mlp.forward(post_attention_layernorm.forward(hidden_states));
    return ops::add(residual, hidden_states);
  }
  hidden_states = post_attention_layernorm.forward(hidden_states);
  hidden_states = ops::add(residual, hidden_states);
  residual = hidden_states;
  hidden_states = pre_feedforward_layernorm->forward(hidden_states);
  hidden_states = mlp.forward(hidden_states);
  hidden_states = post_feedforward_layernorm->forward(hidden_states);
  return ops::add(residual, hidden_states);
}

Status read_gemma_layer_types(const ConfigReader& r, ModelConfig& c, int64_t period) {
  c.layer_types.clear();
  for (int64_t i = 0; i < c.num_hidden_layers; ++i)
    c.layer_types.push_back((i + 1) % period ? "sliding_attention" : "full_attention");
  return read_stated_layer_types(r, c);
}

Result<ModelConfig> read_gemma_config(const ConfigReader& r, const Family& family, const LlamaLikeDefaults& d) {
  CENSUS_ASSIGN(ModelConfig c, read_llama_like(r, family, d));
  CENSUS_TRY(read_attention_bias(r, c));
  // Gemma2 and Gemma3 name the MLP's activation hidden_activation; Gemma reads hidden_act.
  const char* field = r.has("hidden_activation") ? "hidden_activation" : "hidden_act";
  CENSUS_ASSIGN(c.hidden_act, read_hidden_act(r, field, "gelu_pytorch_tanh"));
  return c;
}

std::unique_ptr<nn::Norm> build_gemma_final_norm(const ModelConfig& config, nn::ParameterList& params) {
  return std::make_unique<nn::GemmaRMSNorm>("norm", config.hidden_size, config.rms_norm_eps, params,
                                            liger_norm_sm_count(config), liger_norm_in_place(config));
}

Status read_final_logit_softcapping(const ConfigReader& r, ModelConfig& c, double fallback) {
  // Absent: the config class's default; null: no cap.
  if (!r.json().contains("final_logit_softcapping")) {
    c.final_logit_softcapping = fallback;
    return {};
  }
  if (r.json().at("final_logit_softcapping").is_null()) {
    c.final_logit_softcapping = 0;
    return {};
  }
  CENSUS_ASSIGN(c.final_logit_softcapping, r.positive_number("final_logit_softcapping", fallback));
  return {};
}

Tensor softcap_logits(Tensor logits, double cap) {
  if (cap == 0) return logits;
  logits = ops::div_number(logits, cap);
  logits = ops::tanh(logits);
  return ops::mul_number(logits, cap);
}

namespace {

class GemmaForCausalLM final : public CausalLM {
 public:
  GemmaForCausalLM(const ModelConfig& c, const ModelConfig& layer_config, ModelChunk chunk)
      : CausalLM(c, layer_config, chunk), embed_scale_(make_tensor(Dims{}, Session::current().default_dtype())) {
    if (chunk.first) add_buffer(embed_scale_);
  }

 protected:
  // super().forward(input_ids) * self.embed_scale.to(self.weight.dtype): the cast a no-op where both are
  // bf16; a model built in fp32 (Session::default_dtype) casts its fp32 scale to the bf16 weight's dtype.
  Tensor embed(const Tensor& input_ids) const override {
    Tensor embeddings = embed_tokens->forward(input_ids);
    ModuleScope scope("model.embed_tokens", ModuleKind::kOther);
    return ops::mul(embeddings, ops::to(embed_scale_, embed_tokens->weight().dtype()));
  }
  Tensor logits(const Tensor& hidden_states) const override {
    return softcap_logits(CausalLM::logits(hidden_states), config_.final_logit_softcapping);
  }

 private:
  Tensor embed_scale_;  // () buffer of embed_tokens, in the model's default dtype
};

}  // namespace

std::unique_ptr<CausalLM> build_gemma_causal_lm(const ModelConfig& config, const ModelConfig& layer_config,
                                                ModelChunk chunk) {
  return make_causal_lm<GemmaForCausalLM>(config, layer_config, chunk);
}

namespace {

Result<ModelConfig> read_gemma(const ConfigReader& r);

std::unique_ptr<DecoderLayer> build_gemma_layer(const ModelConfig& config, int64_t /*index*/) {
  return std::make_unique<GemmaDecoderLayer>(config, /*sandwich=*/false);
}

}  // namespace

CENSUS_FAMILY(kGemmaFamily) = {
    .model_type = "gemma",
    .read = read_gemma,
    .build_layer = build_gemma_layer,
    .build_final_norm = build_gemma_final_norm,
    .build_causal_lm = build_gemma_causal_lm,
    .ties_word_embeddings = true,
    .liger_patches = true, .liger_kernels = true,
    .peft_lora = true, .lora_default_targets = "q_proj,v_proj", .autocast = true,
};

namespace {

// GemmaConfig: head_dim 256, gelu-tanh, every layer alike.
Result<ModelConfig> read_gemma(const ConfigReader& r) {
  return read_gemma_config(r, kGemmaFamily, {256000, 3072, 24576, 28, 16, 16, 256});
}

}  // namespace
}  // namespace census
