// File: config.h
// ModelConfig: the fields of a Transformers config.json a census reads, after the family's defaults
// and attribute_map have been applied, and the family that builds its layers.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "nn/attention_kernel.h"
#include "nn/gated_delta_rule.h"
#include "nn/latent_attention.h"
#include "nn/liger_kernels.h"
#include "nn/mamba2_mixer.h"
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
class CausalLM;
struct ModelChunk;

// What a layer hands on to the layers after it in the model's forward, beyond the hidden states, and
// what the model computes once for its layers: GLM-5's top-k indices, which its "shared" layers reuse;
// Gemma 4's rotary of each layer type, the per-layer input the model's loop selects for the layer
// about to run, and the keys and values the last layer of each type before the KV-shared ones stores
// for them (its shared_kv_states); and what the model hands every layer: the input ids (DeepSeek-V4's
// hash routers read them).
struct LayerCarry {
  Tensor topk_indices;
  Tensor input_ids;  // (B, S) int64
  std::map<std::string, nn::PositionEmbeddings> positions;  // by layer type
  Tensor per_layer_inputs;  // (B, S, L, P)
  Tensor per_layer_input;   // the running layer's (B, S, P) slice
  std::map<std::string, std::pair<Tensor, Tensor>> shared_kv;  // by layer type: (keys, values)

  bool empty() const {
    return !topk_indices.defined() && !input_ids.defined() && positions.empty() && !per_layer_inputs.defined() &&
           !per_layer_input.defined() && shared_kv.empty();
  }
};

// One decoder layer built for a census: its forward as the model calls it, and its parameters.
class DecoderLayer {
 public:
  virtual ~DecoderLayer() = default;
  // The model's rotary embedding of the positions of `hidden`, computed once for all layers.
  virtual nn::PositionEmbeddings embed_positions(const Tensor& hidden) const = 0;
  virtual Tensor forward(const Tensor& hidden_states, const nn::PositionEmbeddings& positions) const = 0;
  // The forward as the model's loop calls it (the stack census), reading and writing `carry`; a layer
  // that reads nothing an earlier layer wrote runs its plain forward.
  virtual Tensor forward_in_model(const Tensor& hidden_states, const nn::PositionEmbeddings& positions,
                                  LayerCarry& /*carry*/) const {
    return forward(hidden_states, positions);
  }
  // What the reference hands a layer censused alone beyond its hidden states and positions (Gemma 4's
  // per-layer input, and the shared_kv_states dict the layer stores its keys and values in), made by
  // the caller before the call, and the forward taking them. A checkpointed call keeps them until its
  // graph dies, as torch.utils.checkpoint keeps its call's arguments for the recompute; forward makes
  // its own and drops them when it returns. A layer that takes none runs its plain forward.
  virtual LayerCarry lone_arguments(const Tensor& /*hidden*/) const { return {}; }
  // Whether lone_arguments may hand the layer anything (or the layer store into them): then what a
  // checkpointed call keeps is more than its plain forward shows (Note [Selective kept bytes from the
  // plain forward], census/selective_reading.h). A layer overriding lone_arguments says so here.
  virtual bool has_lone_arguments() const { return false; }
  virtual Tensor forward_alone(const Tensor& hidden_states, const nn::PositionEmbeddings& positions,
                               LayerCarry& /*arguments*/) const {
    return forward(hidden_states, positions);
  }
  const nn::ParameterList& parameters() const { return parameters_; }
  // The final norm, of the class of the layer's input norm: its parameter count.
  virtual int64_t final_norm_parameters() const = 0;
  // Whether the layer's attention has a recurrence (a linear attention's): its weightless ops are then
  // the recurrence's (linrec), not the attention's own.
  virtual bool has_recurrence() const { return false; }
  // Tensors the model registers on the layer's modules as buffers that the layer's ops save (Falcon-H1's
  // mup_vector): live before the forward, as the input is, and counted from the start.
  virtual std::vector<Tensor> buffers() const { return {}; }
  // Every buffer the layer's modules register (what named_buffers() lists), which a training step holds
  // from its start: buffers() and those no op saves (a router's e_score_correction_bias).
  virtual std::vector<Tensor> registered_buffers() const { return buffers(); }

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
  // Nemotron-H's moe_shared_expert_intermediate_size, Granite-4.0-H's shared_intermediate_size: the
  // shared MLP's width, which the reference's tensor-parallel split leaves whole. Nemotron-H's experts'
  // latent width (moe_latent_size; 0: the experts take the hidden states).
  int64_t moe_shared_expert_intermediate_size = 0;
  int64_t moe_latent_size = 0;
  nn::ExpertsImplementation experts_implementation = nn::ExpertsImplementation::kGroupedMm;
  // Expert parallelism (census step --ep): a rank holds num_experts / expert_parallel experts, as
  // Transformers' expert-parallel plan shards them; the router stays whole.
  int64_t expert_parallel = 1;
  // Whether the family's experts shard so ("grouped_gemm" on the experts' weights, dim 0, in its
  // base_model_ep_plan). False where its experts module runs every token through every expert in one
  // batched matmul (Llama 4's), which that plan does not shard: census step refuses --ep for it, and
  // census plan searches no EP degree.
  bool shards_under_expert_parallel = true;
};

// Falcon-H1's μP multipliers, each a multiply by a Python number (no save).
struct FalconMultipliers {
  double key_multiplier = 1.0;
  double attention_in_multiplier = 1.0;
  double attention_out_multiplier = 1.0;
  double ssm_out_multiplier = 1.0;
  double gate_multiplier = 1.0;  // mlp_multipliers[0]
  double down_multiplier = 1.0;  // mlp_multipliers[1]
};

// Gemma 4 (models/gemma4.cpp): its full-attention layers' own head width and K/V heads (head_dim and
// num_key_value_heads are its sliding layers'), and the pieces its layers read from the model.
struct Gemma4Shapes {
  int64_t global_head_dim = 0;             // full_attention layers' head width
  int64_t num_global_key_value_heads = 0;  // full_attention layers' K/V heads (TP-divided)
  bool attention_k_eq_v = false;           // full_attention layers: no v_proj, the values are k_proj's output
  int64_t num_kv_shared_layers = 0;        // the last layers, which reuse earlier layers' keys and values
  bool use_double_wide_mlp = false;        // the KV-shared layers' MLP twice intermediate_size wide
  int64_t hidden_size_per_layer_input = 0;  // the per-layer input's width; 0 where the model has none
  int64_t vocab_size_per_layer_input = 0;
};

// DeepSeek-V3's multi-head latent attention (nn/latent_attention.h).
using MlaConfig = nn::MlaSizes;

// DeepSeek-V4's fields beyond the shared ones (its heads, head_dim, experts and widths are those).
struct DeepseekV4Sizes {
  std::vector<std::string> attention_types;  // per layer: sliding_attention, compressed_sparse_attention,
                                             // heavily_compressed_attention
  std::vector<std::string> mlp_types;        // per layer: hash_moe, moe
  int64_t q_lora_rank = 0;
  int64_t o_groups = 0;
  int64_t o_lora_rank = 0;
  int64_t hc_mult = 0;
  int64_t hc_sinkhorn_iters = 0;
  double hc_eps = 0;
  int64_t csa_compress_rate = 0;
  int64_t hca_compress_rate = 0;
  int64_t main_rope_dim = 0;      // int(head_dim * the "main" rope's partial_rotary_factor)
  int64_t compress_rope_dim = 0;  // the "compress" rope's
  int64_t sliding_window = 0;
  double swiglu_limit = 0;
};

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
  // A run option, not a config field (--liger): Liger's RMSNorm, SwiGLU and rotary kernels in the layers, as
  // its patch binds them (nn/liger_kernels.h); only where the family's liger_kernels says the patch does.
  nn::LigerKernels liger;
  // A run option, not a config field (--micro-batch-size): the sequences of each micro-batch, the batch
  // dimension B of every input a census runs.
  int64_t micro_batch_size = 1;
  // A run option, not a config field (--train-yaml): HyperParallel's fused modules in place of
  // Transformers' own, where a spec selects them (models/replacements.h).
  std::vector<ReplacementSpec> replacements;
  int64_t num_mtp_layers = 0;  // multi-token-prediction layers, stacked after the body
  // The LM head's weight is the token embedding's (tie_word_embeddings, with the family config class's
  // default).
  bool tie_word_embeddings = false;
  // output_router_logits: the model keeps every layer's router logits for the load-balancing loss.
  bool output_router_logits = false;

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

  // DeepSeek Sparse Attention's Lightning indexer (DeepSeek-V3.2, GLM-5): its heads, head width and
  // top-k; 0 heads where the model has none.
  int64_t index_n_heads = 0;
  int64_t index_head_dim = 0;
  int64_t index_topk = 0;
  // Mamba-2 hybrids (Nemotron-H, Granite-4.0-H): the Mamba-2 mixer's sizes, where the model has one.
  std::optional<nn::Mamba2Sizes> mamba;
  FalconMultipliers falcon;  // Falcon-H1
  Gemma4Shapes gemma4;       // Gemma 4
  // Granite-4.0-H: each residual branch is scaled by it (a multiply by a Python number).
  double residual_multiplier = 1.0;
  // Gemma 2, 3 and 4: the causal LM's logits capped as cap * tanh(logits / cap); 0: not capped.
  double final_logit_softcapping = 0;
  // Falcon-H1 and Granite-4.0-H: the model's embeddings times embedding_multiplier; the logits times
  // lm_head_multiplier (Falcon-H1) or divided by logits_scaling (Granite); each a Python number.
  double embedding_multiplier = 1.0;
  double lm_head_multiplier = 1.0;
  double logits_scaling = 1.0;
  // Granite-4.0-H: the model computes a rotary only where position_embedding_type is "rope"; its
  // attention layers rotate nothing otherwise.
  bool model_rotary = true;
  // A layer's kind is its layer_types entry alone, whatever its feed-forward (Nemotron-H's block
  // types, which name the MoE blocks themselves; DeepSeek-V4's "<attention>+<mlp>").
  bool kinds_from_layer_types = false;
  // DeepSeek-V4 (models/deepseek_v4.cpp): its hyper-connections, compressed attention and hash routing.
  std::optional<DeepseekV4Sizes> deepseek_v4;
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
  // Why layer `index` cannot run alone, because it reads what an earlier layer wrote in the same
  // forward (GLM-5's shared-indexer layers); nullptr where it can. Such a layer is priced by the stack
  // census only (census/stack_census.h).
  const char* (*stack_only)(const ModelConfig& config, int64_t index) = nullptr;
  // Every decoder layer of one kind (layer_kinds) runs the same ops on the same shapes inside the
  // model's forward: its build reads its index only through its kind, and the model hands every layer
  // alike inputs. The plan then records the model's forward only as far as each kind's first layer
  // (plan/plan_cost.h, record_stack).
  bool stack_layers_alike_by_kind = false;
  // The family's causal LM around its layers (models/causal_lm.h) where it is not written as Llama's;
  // nullptr where it is.
  std::unique_ptr<CausalLM> (*build_causal_lm)(const ModelConfig& config, const ModelConfig& layer_config,
                                               ModelChunk chunk) = nullptr;
  // Why the model cannot be cut into pipeline stages before layer `boundary` honestly (the stage
  // boundary would have to carry more than the hidden states); nullptr where it can.
  const char* (*pipeline_refusal)(const ModelConfig& config, int64_t boundary) = nullptr;
  // The model's rotary module computes one cos and sin per layer type (config.layer_types), each layer
  // rotating by its type's (Gemma 3's, OLMo 3's, MiMo-V2-Flash's); else one for every layer.
  bool rotary_per_layer_type = false;
  // The config class's default of tie_word_embeddings, and the default of the composite config class
  // (the multimodal one holding this family's under text_config), whose value a composite model ties by.
  bool ties_word_embeddings = false;
  bool composite_ties_word_embeddings = false;
  // Its layers' modules bear the names torchtitan's Llama tensor-parallel plan parallelizes
  // (self_attn.q/k/v/o_proj, mlp.gate/up/down_proj, the input and post-attention norms; a MoE block's
  // gate and experts): census step runs DTensor's plan on it (--sequence-parallel, --loss-parallel,
  // step/tensor_parallel.h). Other families' attention or mixers have modules of their own.
  bool names_llama_tp_plan = false;
  // Liger patches the model type (MODEL_TYPE_TO_APPLY_LIGER_FN at linkedin/Liger-Kernel ead96b6) with no
  // transform of the logits its fused loss would leave out: --loss liger-flce runs on it
  // (nn/liger_fused_linear_cross_entropy.h). Falcon-H1's patch is left out, whose lm_head_multiplier the
  // fused loss would have to apply.
  bool liger_patches = false;
  // Liger's patch for the model type binds its RMSNorm, gated MLP and rotary onto modules the census
  // builds (LlamaDecoderLayer's, GemmaDecoderLayer's): --liger runs them (nn/liger_kernels.h). Other
  // patches swap modules of their own (the experts of a MoE, Gemma 4's, Phi-3's fused gate and up).
  bool liger_kernels = false;
  // Every nn.Linear of Transformers' model for the type is one the census builds as nn::Linear (or the tied
  // head), and no other module is, so torchao's convert_to_float8_training reaches the same modules here
  // (nn/float8_training.h): --fp8 runs on it, checked against the oracle's FP8 cases.
  bool float8_linears = false;
  // PEFT's LoRA reaches the same Linears here as get_peft_model does in Transformers' model for the type,
  // checked against the oracle's LoRA cases (nn/lora.h): --lora runs on it. lora_default_targets: PEFT's
  // default target_modules for the type (TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING at
  // huggingface/peft 5d602fd), comma-separated; nullptr where PEFT maps none and a user must name them.
  bool peft_lora = false;
  const char* lora_default_targets = nullptr;
  // The module names PEFT's Transformers-v5 conversion (utils/transformers_weight_conversion.py,
  // _MOE_TARGET_MODULE_MAPPING, for the model types Transformers converts as qwen2_moe's or mixtral's) moves
  // from target_modules to target_parameters, the fused experts': no Linear of these names is adapted, a
  // dense MLP's neither. Comma-separated; null: none.
  const char* peft_expert_names = nullptr;
  // Transformers' bitsandbytes 4-bit conversion (replace_with_bnb_linear: every exact nn.Linear but the
  // head) reaches the same Linears here, checked against the oracle's QLoRA cases (nn/linear4bit.h):
  // --quantize runs on it. A mixture of experts' experts and routers are no nn.Linear in either.
  bool bnb_4bit = false;
  // The HF Trainer's bf16=True on the model loaded in fp32 (ops/autocast.h) is checked against the oracle's
  // autocast cases on this family's layers: --autocast runs on it (its experts only loaded in bf16:
  // step/autocast_choice.h).
  bool autocast = false;
};

// Defines a family's registry entry in its own file:
//   CENSUS_FAMILY(kQwen3Family) = {"qwen3", read_qwen3, build_qwen3_layer, build_llama_final_norm, "Qwen3"};
// The build collects every CENSUS_FAMILY of models/*.cpp into the registry (models/registry.h), so
// adding a family touches no other file.
#define CENSUS_FAMILY(symbol) \
  extern const ::census::Family symbol; \
  const ::census::Family symbol


// Refuse Liger's kernels (config.liger) where the census does not price them: a model type Liger has no
// patch for, or one whose patch swaps modules the census does not build (Family::liger_kernels), or a row
// wider than Liger's kernels launch on. Ok where the config asks for none.
Status check_liger_kernels(const ModelConfig& config);

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
