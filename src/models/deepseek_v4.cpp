// DeepSeek-V4 (deepseek_v4: transformers/models/deepseek_v4/modeling_deepseek_v4.py, Transformers 5). Each
// decoder layer carries hc_mult residual streams (B, S, M, H) and mixes them in and out of its two
// sublayers through hyper-connections (nn/hyper_connection.h); its attention is shared-KV multi-query
// attention (one K = V head, rotated on its trailing rope slice) over a sliding window, plus, on the
// compressed sparse (CSA) and heavily compressed (HCA) layers, compressed entries of the whole past
// (nn/compressed_attention.h), with per-head sinks and a grouped low-rank output projection; its MoE
// (nn/hash_moe.h) routes by sqrt(softplus) scores, the first layers by a frozen token-id table.
//
// Stack-only: every layer reads the model's input_ids (the hash routers) and the streams the model
// expands its embeddings into, and the reference prices the family through the model's forward
// alone; `census stack` and `census activations` price it so. The model around the layers: the
// embeddings expanded to M contiguous streams, the "main" and "compress" cos and sin computed once,
// and at the end the hc_head's collapse then the final norm.
//
// As the model is built from its config (from_config, no dtype): every parameter and buffer in the
// default dtype, bf16; the checkpoint's fp32 modules (_keep_in_fp32_modules_strict: the
// hyper-connections, sinks, position biases, norms) are fp32 only through from_pretrained. The
// attention runs the census's flash contract, as the reference's stand-in does: the sinks
// (s_aux), the sliding window and the compressors' block masks reach no kernel that keeps them; the
// model builds no mask tensor for a registered attention function.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <tuple>
#include <variant>

#include "models/causal_lm.h"
#include "models/llama.h"
#include "models/moe_layers.h"
#include "nn/attention_kernel.h"
#include "nn/compressed_attention.h"
#include "nn/hash_moe.h"
#include "nn/hyper_connection.h"
#include "ops/ops.h"

namespace census {
namespace {

constexpr const char* kSliding = "sliding_attention";
constexpr const char* kCsa = "compressed_sparse_attention";
constexpr const char* kHca = "heavily_compressed_attention";
constexpr const char* kHashMoe = "hash_moe";
// The most Sinkhorn rounds a hyper-connection runs (hc_sinkhorn_iters): 2^6, three times the checkpoints'.
constexpr int64_t kLargestSinkhornIters = 64;

const DeepseekV4Sizes& v4(const ModelConfig& c) { return *c.deepseek_v4; }

nn::HyperConnectionSizes hc_sizes(const ModelConfig& c) {
  return {v4(c).hc_mult, c.hidden_size, v4(c).hc_sinkhorn_iters, v4(c).hc_eps, c.rms_norm_eps};
}

// DeepseekV4Attention.
class DeepseekV4Attention {
 public:
  DeepseekV4Attention(const ModelConfig& c, int64_t index, nn::ParameterList& params)
      : layer_type_(v4(c).attention_types[static_cast<size_t>(index)]),
        num_heads_(c.num_attention_heads),
        head_dim_(c.head_dim),
        o_groups_(v4(c).o_groups),
        eps_(c.rms_norm_eps),
        kernels_(c.kernels),
        q_a_proj("self_attn.q_a_proj", c.hidden_size, v4(c).q_lora_rank, false, params),
        q_a_norm("self_attn.q_a_norm", v4(c).q_lora_rank, c.rms_norm_eps, params),
        q_b_proj("self_attn.q_b_proj", v4(c).q_lora_rank, c.num_attention_heads * c.head_dim, false, params),
        kv_proj("self_attn.kv_proj", c.hidden_size, c.head_dim, false, params),
        kv_norm("self_attn.kv_norm", c.head_dim, c.rms_norm_eps, params),
        o_a_proj("self_attn.o_a_proj", c.num_attention_heads * c.head_dim / v4(c).o_groups,
                 v4(c).o_groups * v4(c).o_lora_rank, v4(c).o_groups, params),
        o_b_proj("self_attn.o_b_proj", v4(c).o_groups * v4(c).o_lora_rank, c.hidden_size, false, params),
        sinks_(nn::register_parameter(params, "self_attn", "sinks", Dims{c.num_attention_heads})) {
    const nn::CompressorSizes compressor{c.hidden_size, c.head_dim, 0, v4(c).compress_rope_dim, c.rms_norm_eps,
                                         v4(c).main_rope_dim};
    if (layer_type_ == kHca) {
      nn::CompressorSizes hca = compressor;
      hca.compress_rate = v4(c).hca_compress_rate;
      compressor_.emplace<nn::HcaCompressor>("self_attn.compressor", hca, params);
    } else if (layer_type_ == kCsa) {
      nn::CompressorSizes csa = compressor;
      csa.compress_rate = v4(c).csa_compress_rate;
      nn::CompressorSizes indexer = csa;
      indexer.head_dim = c.index_head_dim;
      compressor_.emplace<nn::CsaCompressor>("self_attn.compressor", csa, indexer,
                                             nn::CompressorIndexerSizes{v4(c).q_lora_rank, c.index_n_heads, c.index_topk},
                                             params);
    }
  }

  // The compressor's rotary's buffers (and its indexer's), where the layer has one.
  std::vector<Tensor> buffers() const {
    if (const auto* hca = std::get_if<nn::HcaCompressor>(&compressor_)) return hca->buffers();
    if (const auto* csa = std::get_if<nn::CsaCompressor>(&compressor_)) return csa->buffers();
    return {};
  }

  Tensor forward(const Tensor& hidden_states, const nn::PositionEmbeddings& positions) const {
    ModuleScope scope("self_attn", ModuleKind::kOther);
    const int64_t batch = hidden_states.size(0), seq = hidden_states.size(1);
    // Sliding layers rotate with the "main" rope, CSA and HCA layers with the "compress" one.
    const bool main_rope = layer_type_ == kSliding;
    const Tensor& cos = main_rope ? positions.cos : positions.compress_cos;
    const Tensor& sin = main_rope ? positions.sin : positions.compress_sin;

    Tensor q_residual = q_a_norm.forward(q_a_proj.forward(hidden_states));
    Tensor q = ops::transpose(ops::view(q_b_proj.forward(q_residual), Dims{batch, seq, num_heads_, head_dim_}), 1, 2);
    {
      ModuleScope norm("self_attn.q_b_norm", ModuleKind::kNorm);
      q = nn::unweighted_rms_norm(q, eps_);
    }
    q = nn::apply_trailing_rotary(q, cos, sin);

    Tensor kv = ops::transpose(ops::view(kv_norm.forward(kv_proj.forward(hidden_states)), Dims{batch, seq, 1, head_dim_}), 1, 2);
    kv = nn::apply_trailing_rotary(kv, cos, sin);

    // The compressed entries join the sliding keys on the KV axis; their block bias would extend a
    // tensor mask, and there is none.
    if (const auto* hca = std::get_if<nn::HcaCompressor>(&compressor_)) {
      nn::CompressedKv compressed = hca->forward(hidden_states, positions.position_ids);
      kv = ops::cat({kv, compressed.compressed_kv}, 2);
    } else if (const auto* csa = std::get_if<nn::CsaCompressor>(&compressor_)) {
      nn::CompressedKv compressed = csa->forward(hidden_states, q_residual, positions.position_ids);
      kv = ops::cat({kv, compressed.compressed_kv}, 2);
    }

    // K = V: the one compressed-and-windowed head is both, repeated to every query head by the kernel.
    Tensor attn_output = nn::flash_attention_forward(q, kv, kv, kernels_);  // (B, S, N, D)
    // The values carried the rope too: the conjugate rotation (-sin) at the query's position undoes it.
    attn_output = ops::transpose(nn::apply_trailing_rotary(ops::transpose(attn_output, 1, 2), cos, ops::neg(sin)), 1, 2);

    Tensor grouped = ops::reshape(attn_output, Dims{batch, seq, o_groups_, num_heads_ * head_dim_ / o_groups_});
    grouped = o_a_proj.forward(grouped);
    grouped = ops::reshape(grouped, Dims{batch, seq, grouped.size(2) * grouped.size(3)});  // flatten(2)
    return o_b_proj.forward(grouped);
  }

 private:
  std::string layer_type_;
  int64_t num_heads_;
  int64_t head_dim_;
  int64_t o_groups_;
  double eps_;
  nn::KernelProfile kernels_;
  nn::Linear q_a_proj;  // H -> Rq
  nn::LlamaRMSNorm q_a_norm;
  nn::Linear q_b_proj;  // Rq -> N*D
  nn::Linear kv_proj;   // H -> D
  nn::LlamaRMSNorm kv_norm;
  nn::GroupedLinear o_a_proj;  // G groups of N*D/G -> G*Ro
  nn::Linear o_b_proj;         // G*Ro -> H
  Tensor sinks_;               // (N), handed to the kernel as s_aux
  std::variant<std::monostate, nn::HcaCompressor, nn::CsaCompressor> compressor_;
};

nn::DeepseekV4MoeSizes moe_sizes(const ModelConfig& c) {
  return {c.hidden_size,
          c.moe.num_experts,
          c.moe.num_experts_per_tok,
          c.moe.moe_intermediate_size,
          c.vocab_size,
          c.moe.routed_scaling_factor,
          v4(c).swiglu_limit,
          c.hidden_act,
          c.moe.experts_implementation,
          c.moe.expert_parallel};
}

// post * sublayer_output + comb^T @ streams: the sublayer's output written into every stream beside
// the mixed streams, in the streams' dtype.
Tensor hyper_residual(const nn::HyperConnection::Output& hc, const Tensor& sublayer_output, const Tensor& streams) {
  const DType dtype = streams.dtype();
  Tensor placed = ops::mul(ops::unsqueeze(ops::to(hc.post, dtype), -1), ops::unsqueeze(sublayer_output, -2));
  Tensor mixed = ops::matmul(ops::transpose(ops::to(hc.comb, dtype), -1, -2), streams);
  return ops::add(placed, mixed);
}

class DeepseekV4DecoderLayer final : public DecoderLayer {
 public:
  DeepseekV4DecoderLayer(const ModelConfig& c, int64_t index)
      : hidden_size_(c.hidden_size),
        hc_mult_(v4(c).hc_mult),
        self_attn(c, index, parameters_),
        mlp("mlp", moe_sizes(c), v4(c).mlp_types[static_cast<size_t>(index)] == kHashMoe, parameters_),
        input_layernorm("input_layernorm", c.hidden_size, c.rms_norm_eps, parameters_),
        post_attention_layernorm("post_attention_layernorm", c.hidden_size, c.rms_norm_eps, parameters_),
        attn_hc("attn_hc", hc_sizes(c), parameters_),
        ffn_hc("ffn_hc", hc_sizes(c), parameters_),
        main_rotary(v4(c).main_rope_dim),
        compress_rotary(v4(c).compress_rope_dim) {}

  // DeepseekV4Model.forward before its layers: position_ids = arange(S) + 0, then the "main" and
  // "compress" cos and sin of the model's rotary embedding.
  nn::PositionEmbeddings embed_positions(const Tensor& inputs_embeds) const override {
    nn::PositionEmbeddings out;
    out.position_ids = ops::unsqueeze(ops::add(ops::arange(inputs_embeds.size(1)), 0.0), 0);
    std::tie(out.cos, out.sin) = main_rotary.forward(inputs_embeds, out.position_ids);
    std::tie(out.compress_cos, out.compress_sin) = compress_rotary.forward(inputs_embeds, out.position_ids);
    return out;
  }
  Tensor forward(const Tensor& /*hidden_states*/, const nn::PositionEmbeddings& /*positions*/) const override {
    // The commands refuse a DeepSeek-V4 layer alone (Family::stack_only) before building it.
    throw std::logic_error("a DeepSeek-V4 layer runs only inside the model's forward");
  }
  Tensor forward_in_model(const Tensor& hidden_states, const nn::PositionEmbeddings& positions,
                          LayerCarry& carry) const override {
    Tensor streams = hidden_states;  // (B, S, M, H) throughout
    {
      const nn::HyperConnection::Output hc = attn_hc.forward(streams);
      const Tensor attn_output = self_attn.forward(input_layernorm.forward(hc.collapsed), positions);
      streams = hyper_residual(hc, attn_output, streams);
    }
    const nn::HyperConnection::Output hc = ffn_hc.forward(streams);
    const Tensor mlp_output = mlp.forward(post_attention_layernorm.forward(hc.collapsed), carry.input_ids);
    return hyper_residual(hc, mlp_output, streams);
  }
  int64_t final_norm_parameters() const override { return hidden_size_; }

  std::vector<Tensor> registered_buffers() const override {
    std::vector<Tensor> out = self_attn.buffers();
    for (const Tensor& buffer : mlp.buffers()) out.push_back(buffer);
    return out;
  }

 private:
  int64_t hidden_size_;
  int64_t hc_mult_;
  DeepseekV4Attention self_attn;
  nn::DeepseekV4SparseMoeBlock mlp;
  nn::LlamaRMSNorm input_layernorm;
  nn::LlamaRMSNorm post_attention_layernorm;
  nn::HyperConnection attn_hc;
  nn::HyperConnection ffn_hc;
  // The model's rotary embedding, one per rope type (the layer computes them for the model).
  nn::InterleavedRotaryEmbedding main_rotary;
  nn::InterleavedRotaryEmbedding compress_rotary;
};

// The model's end: norm(hc_head(streams)).
class DeepseekV4ModelHead final : public nn::Norm {
 public:
  DeepseekV4ModelHead(const ModelConfig& c, nn::ParameterList& params)
      : hc_mult_(v4(c).hc_mult), norm("norm", c.hidden_size, c.rms_norm_eps, params), hc_head("hc_head", hc_sizes(c), params) {}
  Tensor forward(const Tensor& streams) const override { return norm.forward(hc_head.forward(streams)); }
  Dims input_sizes(int64_t batch, int64_t seq_length, int64_t hidden_size) const override {
    return Dims{batch, seq_length, hc_mult_, hidden_size};
  }

 private:
  int64_t hc_mult_;
  nn::LlamaRMSNorm norm;
  nn::HyperHead hc_head;
};

std::unique_ptr<nn::Norm> build_deepseek_v4_head(const ModelConfig& config, nn::ParameterList& params) {
  return std::make_unique<DeepseekV4ModelHead>(config, params);
}

// DeepseekV4Model and DeepseekV4ForCausalLM around the layers: the token embedding expanded to hc_mult
// contiguous residual streams, the "main" and "compress" rotary computed once, the input ids handed to
// every layer (its hash router reads them), and at the end norm(hc_head(streams)).
class DeepseekV4ForCausalLM final : public CausalLM {
 public:
  DeepseekV4ForCausalLM(const ModelConfig& c, const ModelConfig& layer_config, ModelChunk chunk)
      : CausalLM(c, layer_config, chunk),
        main_rotary(v4(c).main_rope_dim),
        compress_rotary(v4(c).compress_rope_dim) {
    state_rotary_buffers({main_rotary.inv_freq(), compress_rotary.inv_freq()});
  }

  Tensor model_forward(const Tensor& input_ids, const Tensor& /*inputs_embeds*/, const LayerRunner& runner) const override {
    auto carry = std::make_shared<LayerCarry>();
    carry->input_ids = input_ids;  // the model's argument, bound into every layer's call
    const Tensor inputs_embeds = embed(input_ids);  // (B, S, H)
    // inputs_embeds.unsqueeze(2).expand(-1, -1, hc_mult, -1).contiguous(): (B, S, M, H).
    Dims streams = inputs_embeds.sizes();
    streams.insert(2, config_.deepseek_v4->hc_mult);
    Tensor hidden_states = ops::contiguous(ops::expand(ops::unsqueeze(inputs_embeds, 2), streams));
    // position_ids = arange(S) + 0, then the "main" and "compress" cos and sin of the model's rotary.
    nn::PositionEmbeddings positions;
    positions.position_ids = ops::unsqueeze(ops::add(ops::arange(inputs_embeds.size(1)), 0.0), 0);
    std::tie(positions.cos, positions.sin) = main_rotary.forward(inputs_embeds, positions.position_ids);
    std::tie(positions.compress_cos, positions.compress_sin) = compress_rotary.forward(inputs_embeds, positions.position_ids);
    for (size_t k = 0; k < layers_.size(); ++k) {
      const DecoderLayer* layer = layers_[k].get();
      nn::PositionEmbeddings kind = layer_position_embeddings(positions, runner);
      hidden_states = runner.run(chunk_.begin + static_cast<int64_t>(k), hidden_states,
                                 [layer, kind = std::move(kind), carry](const Tensor& input) {
                                   return layer->forward_in_model(input, kind, *carry);
                                 });
    }
    return final_norm(hidden_states);
  }

 private:
  // DeepseekV4RotaryEmbedding, one per rope type.
  nn::InterleavedRotaryEmbedding main_rotary;
  nn::InterleavedRotaryEmbedding compress_rotary;
};

std::unique_ptr<CausalLM> build_deepseek_v4_causal_lm(const ModelConfig& config, const ModelConfig& layer_config,
                                                      ModelChunk chunk) {
  return make_causal_lm<DeepseekV4ForCausalLM>(config, layer_config, chunk);
}

std::unique_ptr<DecoderLayer> build_deepseek_v4_layer(const ModelConfig& config, int64_t index) {
  return std::make_unique<DeepseekV4DecoderLayer>(config, index);
}

const char* stack_only(const ModelConfig& /*config*/, int64_t /*index*/) {
  return "a DeepSeek-V4 layer takes the model's hc_mult residual streams and input_ids (its hash router), and the "
         "reference prices the family only through the model's forward";
}

Result<ModelConfig> read_deepseek_v4(const ConfigReader& r);

const char* pipeline_refusal(const ModelConfig& /*config*/, int64_t /*boundary*/) {
  return "a DeepSeek-V4 stage boundary would have to carry the model's hc_mult residual streams, not "
         "one hidden state";
}

}  // namespace

// Alike by kind: a layer's build reads its index only through attention_types[index] and
// mlp_types[index], which its kind joins, and the model hands every layer the same (B, S, M, H) streams,
// positions and input ids.
CENSUS_FAMILY(kDeepseekV4Family) = {
    .model_type = "deepseek_v4",
    .read = read_deepseek_v4,
    .build_layer = build_deepseek_v4_layer,
    .build_final_norm = build_deepseek_v4_head,
    .stack_only = stack_only,
    .stack_layers_alike_by_kind = true,
    .build_causal_lm = build_deepseek_v4_causal_lm,
    .pipeline_refusal = pipeline_refusal,
    .liger_patches = true,
};

namespace {

// The classes Transformers' deepseek_v4 defines (its __all__): a config naming another architecture
// names a model Transformers does not build.
constexpr std::string_view kTransformersClasses[] = {"DeepseekV4ForCausalLM", "DeepseekV4Model",
                                                     "DeepseekV4PreTrainedModel"};

Status check_architecture(const ConfigReader& r) {
  if (!r.has("architectures")) return {};
  const nlohmann::json& stated = r.json().at("architectures");
  if (!stated.is_array() || stated.empty()) return {};
  if (!stated[0].is_string())
    return refuse("architectures", "has " + shown(stated[0]) + " first; name the model's class as a string");
  const std::string architecture = stated[0].get<std::string>();
  if (architecture.empty()) return {};
  for (std::string_view known : kTransformersClasses)
    if (architecture == known) return {};
  return refuse("architectures",
                "names " + shown(stated[0]) + ", which Transformers does not build (its deepseek_v4 builds "
                    "DeepseekV4ForCausalLM); price it from a tree carrying that model: Transformers' DeepSeek-V4 in its "
                    "place would price a different model");
}

// The layer types a list of legacy compress ratios (0 / 4 / 128 per layer) names.
Result<std::vector<std::string>> types_from_ratios(const nlohmann::json& ratios, int64_t layers) {
  if (!ratios.is_array()) return refuse("compress_ratios", "must list one compress ratio per layer; fix the config");
  CENSUS_TRY(check_per_layer("compress_ratios", static_cast<int64_t>(ratios.size()), layers, PerLayer::kCut));
  std::vector<std::string> types;
  for (const auto& ratio : ratios) {
    if (static_cast<int64_t>(types.size()) == layers) break;  // cut, as layer_types is
    if (ratio == 0) types.emplace_back(kSliding);
    else if (ratio == 4) types.emplace_back(kCsa);
    else if (ratio == 128) types.emplace_back(kHca);
    else return refuse("compress_ratios", "has " + shown(ratio) + "; the known ratios are 0, 4 and 128");
  }
  return types;
}

// int(head_dim * partial_rotary_factor) of one rope type: its own factor where rope_parameters nests
// "main" and "compress", else the config's.
Result<int64_t> rope_dim(const ConfigReader& r, const char* type, int64_t head_dim, double partial_rotary_factor) {
  double factor = partial_rotary_factor;
  if (r.has("rope_parameters") && r.json().at("rope_parameters").is_object()) {
    const nlohmann::json& rope = r.json().at("rope_parameters");
    if (rope.contains("main") && rope.at("main").is_object() && rope.contains("compress") &&
        rope.at("compress").is_object()) {
      const nlohmann::json& own = rope.at(type);
      factor = own.contains("partial_rotary_factor") && own.at("partial_rotary_factor").is_number()
                   ? own.at("partial_rotary_factor").get<double>()
                   : 1.0;
    }
  }
  // A share of head_dim: checked before the product is cast (1e45 * head_dim would not fit 64 bits).
  if (!(factor > 0 && factor <= 1))
    return refuse("partial_rotary_factor", "must be a number in (0, 1], not " + shown(factor) + "; fix the config");
  const auto dim = static_cast<int64_t>(static_cast<double>(head_dim) * factor);
  if (dim <= 0 || dim % 2 != 0 || dim > head_dim)
    return refuse("partial_rotary_factor", "makes a rope width of " + std::to_string(dim) + " of head_dim " +
                                               std::to_string(head_dim) + "; it must be even and within the head");
  return dim;
}

// DeepseekV4Config: its defaults (DeepSeek-V4-Flash's shape), attribute_map (num_local_experts,
// intermediate_size -> moe_intermediate_size) and __post_init__'s legacy fields (compress_ratios,
// compress_rate_csa / _hca, num_hash_layers, qk_rope_head_dim).
Result<ModelConfig> read_deepseek_v4(const ConfigReader& r) {
  CENSUS_TRY(check_architecture(r));
  CENSUS_ASSIGN(ModelConfig c, read_llama_like(r, kDeepseekV4Family, {129280, 4096, 2048, 43, 64, 1, 512}));
  const int64_t layers = c.num_hidden_layers;
  CENSUS_TRY(read_routed_experts(r, "n_routed_experts", "num_local_experts", 256, 6, c.moe));
  const char* width_field = r.has("moe_intermediate_size") || !r.has("intermediate_size") ? "moe_intermediate_size"
                                                                                           : "intermediate_size";
  CENSUS_ASSIGN(c.moe.moe_intermediate_size, r.size(width_field, 2048));
  c.intermediate_size = 0;  // the attribute_map's alias of moe_intermediate_size: divided once, there
  CENSUS_ASSIGN(c.moe.n_shared_experts, r.size("n_shared_experts", 1));
  CENSUS_ASSIGN(c.moe.routed_scaling_factor, r.positive_number("routed_scaling_factor", 1.5));
  CENSUS_ASSIGN(c.moe.norm_topk_prob, r.flag("norm_topk_prob", true));
  CENSUS_ASSIGN(const std::string scoring, r.text("scoring_func", "sqrtsoftplus"));
  if (scoring != "sqrtsoftplus")
    return refuse("scoring_func", "'" + scoring + "' is not priced; DeepSeek-V4's routers score with sqrtsoftplus");
  CENSUS_ASSIGN(c.index_n_heads, r.size("index_n_heads", 64));
  CENSUS_ASSIGN(c.index_head_dim, r.size("index_head_dim", 128));
  CENSUS_ASSIGN(c.index_topk, r.size("index_topk", 512));
  CENSUS_ASSIGN(c.num_mtp_layers, r.count("num_nextn_predict_layers", 1));

  DeepseekV4Sizes v;
  CENSUS_ASSIGN(v.q_lora_rank, r.size("q_lora_rank", 1024));
  CENSUS_ASSIGN(v.o_groups, r.size("o_groups", 8));
  CENSUS_ASSIGN(v.o_lora_rank, r.size("o_lora_rank", 1024));
  CENSUS_ASSIGN(v.hc_mult, r.size("hc_mult", 4));
  CENSUS_ASSIGN(v.hc_sinkhorn_iters, r.size("hc_sinkhorn_iters", 20));
  // Each Sinkhorn round is six ops the census runs, and a comb it keeps, in both hyper-connections of
  // every layer (the stack census, which prices this family, runs every round): the rounds bound its
  // time and memory. The checkpoints run 20, and the normalization has converged within a few tens.
  if (v.hc_sinkhorn_iters > kLargestSinkhornIters)
    return refuse("hc_sinkhorn_iters", std::to_string(v.hc_sinkhorn_iters) + " rounds are more than a census runs (at most " +
                                           std::to_string(kLargestSinkhornIters) +
                                           "; DeepSeek-V4's checkpoints run 20); fix the config");
  CENSUS_ASSIGN(v.hc_eps, r.positive_number("hc_eps", 1e-6));
  CENSUS_ASSIGN(v.sliding_window, r.size("sliding_window", 128));
  CENSUS_ASSIGN(v.swiglu_limit, r.positive_number("swiglu_limit", 10.0));
  if ((c.num_attention_heads * c.head_dim) % v.o_groups != 0)
    return refuse("o_groups", std::to_string(v.o_groups) + " groups do not divide the " +
                                  std::to_string(c.num_attention_heads * c.head_dim) + " attention channels; fix the config");

  // compress_rates, with the legacy scalar overrides folded in.
  v.csa_compress_rate = 4;
  v.hca_compress_rate = 128;
  CENSUS_ASSIGN(std::optional<ConfigReader> rates, r.section("compress_rates"));
  if (rates) {
    CENSUS_ASSIGN(v.csa_compress_rate, rates->size(kCsa, 4));
    CENSUS_ASSIGN(v.hca_compress_rate, rates->size(kHca, 128));
  }
  CENSUS_ASSIGN(v.csa_compress_rate, r.size("compress_rate_csa", v.csa_compress_rate));
  CENSUS_ASSIGN(v.hca_compress_rate, r.size("compress_rate_hca", v.hca_compress_rate));

  // layer_types: stated, else from the legacy compress_ratios, else 2 HCA layers then HCA / CSA in turn.
  // DeepseekV4Config cuts a stated list to num_hidden_layers (the checkpoints' compress_ratios list one
  // more, for the MTP layer), so a longer one runs with its first entries.
  if (r.has("layer_types")) {
    CENSUS_ASSIGN(v.attention_types, r.layer_kinds("layer_types", layers, {kSliding, kCsa, kHca}, PerLayer::kCut));
  } else if (r.has("compress_ratios")) {
    CENSUS_ASSIGN(v.attention_types, types_from_ratios(r.json().at("compress_ratios"), layers));
  } else {
    for (int64_t i = 0; i < layers; ++i) v.attention_types.emplace_back(i < 2 || (i - 2) % 2 == 0 ? kHca : kCsa);
  }
  // mlp_layer_types: stated (cut alike), else the first num_hash_layers (3) hash_moe, the rest moe.
  if (r.has("mlp_layer_types")) {
    CENSUS_ASSIGN(v.mlp_types, r.layer_kinds("mlp_layer_types", layers, {kHashMoe, "moe"}, PerLayer::kCut));
  } else {
    CENSUS_ASSIGN(const int64_t hash_layers, r.count("num_hash_layers", 3));
    for (int64_t i = 0; i < layers; ++i) v.mlp_types.emplace_back(i < hash_layers ? kHashMoe : "moe");
  }

  // partial_rotary_factor: stated, else the legacy qk_rope_head_dim / head_dim, else 64 / 512.
  // A stated qk_rope_head_dim is a width whatever else is stated: read (and refused where it is none)
  // even where partial_rotary_factor, which DeepseekV4Config prefers, makes it unread.
  double factor = 64.0 / 512.0;
  CENSUS_ASSIGN(const int64_t rope_head_dim, r.size("qk_rope_head_dim", 64));
  if (r.has("partial_rotary_factor")) {
    CENSUS_ASSIGN(factor, r.positive_number("partial_rotary_factor", factor));
  } else if (r.has("qk_rope_head_dim")) {
    factor = static_cast<double>(rope_head_dim) / static_cast<double>(c.head_dim);
  }
  CENSUS_ASSIGN(v.main_rope_dim, rope_dim(r, "main", c.head_dim, factor));
  CENSUS_ASSIGN(v.compress_rope_dim, rope_dim(r, "compress", c.head_dim, factor));
  if (c.index_head_dim < v.compress_rope_dim)
    return refuse("index_head_dim", std::to_string(c.index_head_dim) + " is narrower than the rope width " +
                                        std::to_string(v.compress_rope_dim) + " its queries rotate; fix the config");

  // A layer's kind: its attention and its feed-forward.
  c.layer_types.clear();
  for (int64_t i = 0; i < layers; ++i)
    c.layer_types.push_back(v.attention_types[static_cast<size_t>(i)] + "+" + v.mlp_types[static_cast<size_t>(i)]);
  c.kinds_from_layer_types = true;
  c.deepseek_v4 = std::move(v);
  return c;
}

}  // namespace

}  // namespace census
