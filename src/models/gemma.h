// File: gemma.h
// Gemma's decoder layer and config (transformers/models/gemma/modeling_gemma.py, Transformers 5),
// which Gemma 2 and Gemma 3 (gemma2.cpp, gemma3.cpp) copy:
// Llama's layer with GemmaRMSNorm ((1 + w) in fp32) and a gelu-tanh MLP (Gemma); with sandwich norms
// around the attention and the MLP (Gemma2, Gemma3); with per-head q/k norms on the transposed
// queries and keys (Gemma3). Sliding and full layers run the same ops under the flash contract and
// are kinds of their own, as layer_types states them.
//
// Legend: S = seq_length, H = hidden_size, Nh = heads, Nkv = key/value heads, D = head_dim.
#pragma once

#include <optional>

#include "models/causal_lm.h"
#include "models/config.h"
#include "models/config_reader.h"
#include "models/llama.h"
#include "nn/attention_kernel.h"
#include "nn/linear.h"
#include "nn/mlp.h"
#include "nn/rms_norm.h"
#include "nn/rotary.h"

namespace census {

class GemmaAttention {
 public:
  GemmaAttention(const ModelConfig& config, nn::ParameterList& params);
  Tensor forward(const Tensor& hidden_states, const nn::PositionEmbeddings& positions) const;

 private:
  std::string path_ = "self_attn";
  nn::KernelProfile kernels_;  // whose flash contract the attention runs
  bool liger_rope_;            // Liger's rotary in place of apply_rotary_pos_emb (nn/liger_kernels.h)
  int64_t head_dim_;
  nn::Linear q_proj;
  nn::Linear k_proj;
  nn::Linear v_proj;
  nn::Linear o_proj;
  std::optional<nn::GemmaRMSNorm> q_norm;  // Gemma3, over D
  std::optional<nn::GemmaRMSNorm> k_norm;
};

class GemmaDecoderLayer final : public DecoderLayer {
 public:
  // `sandwich`: Gemma2 and Gemma3's norms after the attention and around the MLP.
  GemmaDecoderLayer(const ModelConfig& config, bool sandwich);
  nn::PositionEmbeddings embed_positions(const Tensor& hidden) const override { return rotary_emb.forward(hidden); }
  Tensor forward(const Tensor& hidden_states, const nn::PositionEmbeddings& positions) const override;
  int64_t final_norm_parameters() const override { return hidden_size_; }

 private:
  int64_t hidden_size_;
  bool sandwich_;  // Gemma2 and Gemma3: norms after the attention and around the MLP
  GemmaAttention self_attn;
  nn::GatedMLP mlp;
  nn::GemmaRMSNorm input_layernorm;
  nn::GemmaRMSNorm post_attention_layernorm;
  std::optional<nn::GemmaRMSNorm> pre_feedforward_layernorm;
  std::optional<nn::GemmaRMSNorm> post_feedforward_layernorm;
  nn::RotaryEmbedding rotary_emb;
};

// The Gemma families' shared fields (Llama's sizes, attention_bias, the gelu-tanh activation under
// hidden_act or hidden_activation), with `defaults`.
Result<ModelConfig> read_gemma_config(const ConfigReader& reader, const Family& family, const LlamaLikeDefaults& defaults);
// layer_types: sliding attention but for every `period`-th layer, unless the config states its own.
Status read_gemma_layer_types(const ConfigReader& reader, ModelConfig& config, int64_t period);
std::unique_ptr<nn::Norm> build_gemma_final_norm(const ModelConfig& config, nn::ParameterList& params);
// Liger's patch on Gemma's norms: the SM count where it binds LigerRMSNorm's forward (0: it does not), and
// whether the norm writes its input's gradient over the incoming one (Gemma's; Gemma 2's and 3's patches
// set in_place=False).
int64_t liger_norm_sm_count(const ModelConfig& config);
bool liger_norm_in_place(const ModelConfig& config);
// final_logit_softcapping: a positive number, or null for none; `fallback` (0: none) where absent.
Status read_final_logit_softcapping(const ConfigReader& reader, ModelConfig& config, double fallback);
// logits = cap * tanh(logits / cap), as Gemma2ForCausalLM.forward caps them; `logits` as they are
// where the config caps none.
Tensor softcap_logits(Tensor logits, double cap);

// GemmaForCausalLM (and Gemma 2's and 3's): Llama's model but for the token embedding
// (Gemma*TextScaledWordEmbedding: the embedding times its (0-d) embed_scale buffer, sqrt(H) in the
// embedding's dtype, which the multiply keeps) and the logits' softcapping.
std::unique_ptr<CausalLM> build_gemma_causal_lm(const ModelConfig& config, const ModelConfig& layer_config,
                                                ModelChunk chunk);

}  // namespace census
