// File: config.h
// ModelConfig: the fields of a Transformers config.json a census reads, after the family's defaults
// and attribute_map have been applied, and the family that builds its layers.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "nn/attention_kernel.h"
#include "nn/gated_delta_rule.h"
#include "nn/latent_attention.h"
#include "nn/module.h"
#include "nn/mlp.h"
#include "nn/moe.h"
#include "nn/rms_norm.h"
#include "nn/rotary.h"
#include "models/config_reader.h"
#include "models/replacements.h"
#include "util/result.h"

namespace census {

struct Family;

// One decoder layer built for a census: its forward as the model calls it, and its parameters.
class DecoderLayer {
 public:
  virtual ~DecoderLayer() = default;
  // The model's rotary embedding of the positions of `hidden`, computed once for all layers.
  virtual nn::PositionEmbeddings embed_positions(const Tensor& hidden) const = 0;
  virtual Tensor forward(const Tensor& hidden_states, const nn::PositionEmbeddings& positions) const = 0;
  const nn::ParameterList& parameters() const { return parameters_; }
  // The final norm, of the class of the layer's input norm: its parameter count.
  virtual int64_t final_norm_parameters() const = 0;
  // Whether the layer's attention has a recurrence (a linear attention's): its weightless ops are then
  // the recurrence's (linrec), not the attention's own.
  virtual bool has_recurrence() const { return false; }

 protected:
  nn::ParameterList parameters_;
};

// The mixture-of-experts fields of a config. With no experts every layer is dense; with experts a
// layer is sparse from first_k_dense_replace on, every decoder_sparse_step-th, unless listed in
// mlp_only_layers (is_moe_layer). Which block a sparse layer builds is its family's choice.
struct MoeConfig {
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;            // an expert's width
  int64_t shared_expert_intermediate_size = 0;  // Qwen2-MoE, Qwen3-Next: one sigmoid-gated shared expert
  int64_t n_shared_experts = 0;                 // DeepSeek-V3: shared experts of moe_intermediate_size each
  bool norm_topk_prob = false;
  // Which layers are MoE: Qwen's decoder_sparse_step and mlp_only_layers, DeepSeek's first_k_dense_replace.
  int64_t decoder_sparse_step = 1;
  std::vector<int64_t> mlp_only_layers;
  int64_t first_k_dense_replace = 0;
  // DeepSeek-V3's group-limited routing.
  int64_t n_group = 1;
  int64_t topk_group = 1;
  double routed_scaling_factor = 1.0;
  double norm_min = 0;  // ERNIE-4.5: the floor its router clamps the top-k sum to (moe_norm_min)
  nn::ExpertsImplementation experts_implementation = nn::ExpertsImplementation::kGroupedMm;
};

// DeepSeek-V3's multi-head latent attention (nn/latent_attention.h).
using MlaConfig = nn::MlaSizes;

struct ModelConfig {
  const Family* family = nullptr;
  std::string model_type;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;
  int64_t vocab_size = 0;
  double rms_norm_eps = 1e-6;
  nn::HiddenAct hidden_act = nn::HiddenAct::kSilu;
  bool qkv_bias = false;   // q_proj, k_proj, v_proj
  bool o_bias = false;     // o_proj
  bool mlp_bias = false;
  bool qk_norm = false;    // per-head q_norm and k_norm (Qwen3)
  // MiniMax-M2: q_norm and k_norm over the whole projection (Nh*D and Nkv*D), not per head; a TP rank
  // normalizes its own heads' slice, as the reference's rank of Nh/t heads builds it.
  bool qk_norm_over_heads = false;
  // Seed-OSS: dropout on the attention's and the MLP's outputs, which a training step runs (its
  // attention_dropout changes nothing the flash contract saves).
  double residual_dropout = 0.0;
  // MiMo-V2-Flash: the value heads' width where it differs from head_dim (the queries' and keys'); 0:
  // head_dim.
  int64_t v_head_dim = 0;
  // Llama 4: its NoPE layers scale the queries by a per-position attention temperature.
  bool attn_temperature_tuning = false;
  // One entry per layer ("full_attention", "sliding_attention"), as the config states or derives it.
  std::vector<std::string> layer_types;
  MoeConfig moe;
  MlaConfig mla;
  // A run option, not a config field (--kernels): whose kernel contracts the layers run (Note [Kernel
  // profiles]).
  nn::KernelProfile kernels = nn::KernelProfile::kNpu;
  // A run option, not a config field (--train-yaml): HyperParallel's fused modules in place of
  // Transformers' own, where a spec selects them (models/replacements.h).
  std::vector<ReplacementSpec> replacements;
  int64_t num_mtp_layers = 0;  // multi-token-prediction layers, stacked after the body

  // Gated delta net (Qwen3-Next, Qwen3.5): the linear_attention layers' sizes, and the full-attention
  // layers' output gate and partial rotary.
  int64_t linear_num_key_heads = 0;
  int64_t linear_num_value_heads = 0;
  int64_t linear_key_head_dim = 0;
  int64_t linear_value_head_dim = 0;
  int64_t linear_conv_kernel_dim = 0;
  int64_t rotary_dim = 0;  // int(head_dim * partial_rotary_factor); 0: the whole head_dim
  // A run option, not a config field (--gdn-backend): the gated delta rule the layers run.
  nn::GdnBackend gdn_backend = nn::GdnBackend::kEager;
};

// Whether layer `index` builds a mixture of experts rather than a dense MLP.
bool is_moe_layer(const ModelConfig& config, int64_t index);

// A run of consecutive layers of one kind, as a model's layer stack is grouped.
struct LayerGroup {
  std::string kind;
  int64_t count;
  bool mtp = false;  // multi-token-prediction layers: stacked last, not censused
};

// Family: one Transformers model_type, as its file in models/ defines it (CENSUS_FAMILY): its config
// reader (the config class's defaults and attribute_map, the layer kinds), its decoder layer, and the
// model's final norm.
struct Family {
  const char* model_type;
  Result<ModelConfig> (*read)(const ConfigReader& reader);
  std::unique_ptr<DecoderLayer> (*build_layer)(const ModelConfig& config, int64_t index);
  // The model's final norm, of the class of a layer's input norm.
  std::unique_ptr<nn::Norm> (*build_final_norm)(const ModelConfig& config, nn::ParameterList& params);
  // The prefix of the family's Transformers classes ("Qwen3Moe" for Qwen3MoeRMSNorm), where its
  // layers take module replacements; nullptr where they do not yet.
  const char* class_prefix = nullptr;
};

// Defines a family's registry entry in its own file:
//   CENSUS_FAMILY(kQwen3Family) = {"qwen3", read_qwen3, build_qwen3_layer, build_llama_final_norm, "Qwen3"};
// The build collects every CENSUS_FAMILY of models/*.cpp into the registry (models/registry.h), so
// adding a family touches no other file.
#define CENSUS_FAMILY(symbol) \
  extern const ::census::Family symbol; \
  const ::census::Family symbol


// Each layer's kind, as the census names it: what varies across the stack, its attention (layer_types),
// its feed-forward ("dense" or "moe"), both ("<type>_<ffn>"), or neither ("decoder").
std::vector<std::string> layer_kinds(const ModelConfig& config);
std::string layer_kind(const ModelConfig& config, int64_t index);

// The layer stack, run-length grouped by kind.
std::vector<LayerGroup> layer_stack(const ModelConfig& config);

// The fields a tensor-parallel rank holds a share of, declared once: tp_config divides them, the
// command line and Python check a degree against them, Python's tp_config divides the same names.
struct TpDividedField {
  const char* name;  // as config.json names it
  int64_t (*get)(const ModelConfig& config);
  void (*set)(ModelConfig& config, int64_t value);
};
std::span<const TpDividedField> tp_divided_fields();

// `config` as one of `tp` tensor-parallel ranks holds its layers: heads and widths divided (each at
// least 1), head_dim kept.
ModelConfig tp_config(const ModelConfig& config, int64_t tp);

}  // namespace census
