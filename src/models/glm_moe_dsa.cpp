// GLM-5 (glm_moe_dsa: transformers/models/glm_moe_dsa/modeling_glm_moe_dsa.py, Transformers 5): DeepSeek-V3.2's
// layer (deepseek_v32.h) with the indexer's rotary on interleaved pairs, and cross-layer top-k sharing:
// indexer_types names each layer "full" (its own indexer) or "shared" (no indexer: it attends with the
// top-k indices the layer before handed on, GlmMoeDsaModel's prev_topk_indices).
//
// Stack-only layers: a "shared" layer reads the top-k an earlier layer chose in the same forward, and
// Transformers refuses to run it without them, so no census runs it alone; `census stack` and
// `census activations` price it inside the model's forward.
#include <stdexcept>

#include "models/causal_lm.h"
#include "models/deepseek_v3.h"
#include "models/deepseek_v32.h"
#include "nn/pre_norm_layer.h"
#include "ops/ops.h"

namespace census {
namespace {

constexpr const char* kShared = "shared";

bool shared_indexer(const ModelConfig& c, int64_t index) {
  return static_cast<size_t>(index) < c.layer_types.size() && c.layer_types[static_cast<size_t>(index)] == kShared;
}

const char* stack_only(const ModelConfig& c, int64_t index) {
  return shared_indexer(c, index)
             ? "its indexer_types entry is \"shared\": it attends with the top-k indices the layer before chose in the "
               "same forward, and cannot run without them"
             : nullptr;
}

class GlmMoeDsaDecoderLayer final : public DecoderLayer {
 public:
  GlmMoeDsaDecoderLayer(const ModelConfig& c, int64_t index)
      : hidden_size_(c.hidden_size),
        shared_(shared_indexer(c, index)),
        self_attn(c, /*indexer=*/!shared_, /*indexer_rope_interleave=*/true, parameters_),
        mlp(build_deepseek_v32_mlp(c, index, parameters_)),
        input_layernorm("input_layernorm", c.hidden_size, c.rms_norm_eps, parameters_),
        post_attention_layernorm("post_attention_layernorm", c.hidden_size, c.rms_norm_eps, parameters_),
        rotary_emb(c.mla.qk_rope_head_dim) {}
  nn::PositionEmbeddings embed_positions(const Tensor& hidden) const override { return rotary_emb.forward(hidden); }
  Tensor forward(const Tensor& input, const nn::PositionEmbeddings& positions) const override {
    // The commands refuse a shared layer alone (Family::stack_only) before building it.
    if (shared_) throw std::logic_error("a shared-indexer layer runs only inside the model's forward");
    LayerCarry none;
    return forward_in_model(input, positions, none);
  }
  // forward(hidden_states, ..., prev_topk_indices) -> (hidden_states, topk_indices)
  Tensor forward_in_model(const Tensor& input, const nn::PositionEmbeddings& positions, LayerCarry& carry) const override {
    Tensor topk_indices;
    Tensor out = nn::pre_norm_layer_forward(
        input, input_layernorm,
        [&](const Tensor& normed) {
          auto [attn_output, chosen] = self_attn.forward(normed, positions, carry.topk_indices);
          topk_indices = chosen;
          return attn_output;
        },
        post_attention_layernorm, *mlp);
    carry.topk_indices = topk_indices;
    return out;
  }
  int64_t final_norm_parameters() const override { return hidden_size_; }

  std::vector<Tensor> registered_buffers() const override { return mlp->buffers(); }

 private:
  int64_t hidden_size_;
  bool shared_;
  DeepseekV32Attention self_attn;
  std::unique_ptr<nn::FeedForward> mlp;
  nn::LlamaRMSNorm input_layernorm;
  nn::LlamaRMSNorm post_attention_layernorm;
  nn::RotaryEmbedding rotary_emb;  // Dr wide
};

Result<ModelConfig> read_glm_moe_dsa(const ConfigReader& r);

std::unique_ptr<DecoderLayer> build_glm_moe_dsa_layer(const ModelConfig& config, int64_t index) {
  return std::make_unique<GlmMoeDsaDecoderLayer>(config, index);
}

// GlmMoeDsaModel's loop: `hidden_states, topk_indices = decoder_layer(hidden_states, ...,
// prev_topk_indices=topk_indices)`, topk_indices None before the first layer. Each call binds the top-k
// it is handed by value; the top-k it returns reaches the model's loop while the forward runs (a
// checkpoint's recompute returns one nobody reads).
class GlmMoeDsaForCausalLM final : public CausalLM {
 public:
  using CausalLM::CausalLM;

  Tensor model_forward(const Tensor& input_ids, const Tensor& received, const LayerRunner& runner) const override {
    const Tensor inputs_embeds =
        chunk_.first ? runner.run_embedding(input_ids, [this](const Tensor& ids) { return embed(ids); }) : received;
    nn::PositionEmbeddings positions;
    {
      const Tensor arange = ops::arange(inputs_embeds.size(1));  // position_ids = arange(S) + 0: a temporary
      positions = embed_positions(inputs_embeds).front();
    }
    Tensor hidden_states = inputs_embeds;
    auto topk_indices = std::make_shared<Tensor>();
    const std::weak_ptr<Tensor> returned = topk_indices;
    for (size_t k = 0; k < layers_.size(); ++k) {
      const DecoderLayer* layer = layers_[k].get();
      const Tensor prev_topk_indices = *topk_indices;
      nn::PositionEmbeddings kind = layer_position_embeddings(positions, runner);
      hidden_states = runner.run(chunk_.begin + static_cast<int64_t>(k), hidden_states,
                                 [layer, kind = std::move(kind), prev_topk_indices, returned](const Tensor& input) {
                                   LayerCarry carry;
                                   carry.topk_indices = prev_topk_indices;
                                   Tensor out = layer->forward_in_model(input, kind, carry);
                                   if (auto slot = returned.lock()) *slot = std::move(carry.topk_indices);
                                   return out;
                                 });
    }
    if (chunk_.last) hidden_states = runner.run_final_norm(hidden_states, [this](const Tensor& h) { return final_norm(h); });
    return hidden_states;  // the model's locals, the last top-k among them, go on return
  }
};

std::unique_ptr<CausalLM> build_glm_moe_dsa_causal_lm(const ModelConfig& config, const ModelConfig& layer_config,
                                                      ModelChunk chunk) {
  return make_causal_lm<GlmMoeDsaForCausalLM>(config, layer_config, chunk);
}

// A stage cannot begin with a shared layer: the top-k it attends with were chosen on the stage before.
const char* pipeline_refusal(const ModelConfig& config, int64_t boundary) {
  return shared_indexer(config, boundary) ? "a stage would begin with a \"shared\" indexer layer, which attends with "
                                            "the top-k indices the layer before it (on the stage before) chose"
                                          : nullptr;
}

}  // namespace

CENSUS_FAMILY(kGlmMoeDsaFamily) = {
    .model_type = "glm_moe_dsa",
    .read = read_glm_moe_dsa,
    .build_layer = build_glm_moe_dsa_layer,
    .build_final_norm = build_llama_final_norm,
    .stack_only = stack_only,
    .build_causal_lm = build_glm_moe_dsa_causal_lm,
    .pipeline_refusal = pipeline_refusal,
};

namespace {

// GlmMoeDsaConfig's defaults where they differ from DeepseekV32Config's (GLM-5's shape).
const nlohmann::json& glm_defaults() {
  static const nlohmann::json defaults = {
      {"vocab_size", 154880}, {"hidden_size", 6144}, {"intermediate_size", 12288}, {"moe_intermediate_size", 2048},
      {"num_hidden_layers", 78}, {"num_attention_heads", 64}, {"num_key_value_heads", 64}, {"q_lora_rank", 2048},
      {"v_head_dim", 256}, {"qk_nope_head_dim", 192}, {"n_group", 1}, {"topk_group", 1}, {"rms_norm_eps", 1e-5},
      {"index_n_heads", 32}};
  return defaults;
}

Result<ModelConfig> read_glm_moe_dsa(const ConfigReader& r) {
  nlohmann::json fields = glm_defaults();
  fields.update(r.json());
  const ConfigReader reader(fields);
  CENSUS_ASSIGN(ModelConfig c, read_deepseek_v32_config(reader, kGlmMoeDsaFamily));
  const int64_t layers = c.num_hidden_layers;
  // indexer_types (else index_topk_pattern: its letters, or a list as indexer_types) is indexed by each
  // layer, so a longer one runs with its first entries.
  std::vector<std::string> types;
  if (reader.has("indexer_types") || (reader.has("index_topk_pattern") && !fields.at("index_topk_pattern").is_string())) {
    const char* field = reader.has("indexer_types") ? "indexer_types" : "index_topk_pattern";
    CENSUS_ASSIGN(types, reader.layer_kinds(field, layers, {"full", kShared}, PerLayer::kCut));
  } else if (reader.has("index_topk_pattern")) {
    const std::string& pattern = fields.at("index_topk_pattern").get_ref<const std::string&>();
    CENSUS_TRY(check_per_layer("index_topk_pattern", static_cast<int64_t>(pattern.size()), layers, PerLayer::kCut));
    for (const char letter : pattern.substr(0, static_cast<size_t>(layers))) {
      if (letter != 'F' && letter != 'S')
        return refuse("index_topk_pattern", "has " + echoed(std::string(1, letter)) + "; it may hold only F (full) and S (shared)");
      types.push_back(letter == 'F' ? "full" : kShared);
    }
  } else {
    // index_topk_freq / index_skip_topk_offset: from the offset on, every freq-th layer runs its own indexer.
    CENSUS_ASSIGN(const int64_t freq_stated, reader.count("index_topk_freq", 1));
    CENSUS_ASSIGN(const int64_t offset, reader.count("index_skip_topk_offset", 2));
    const int64_t freq = std::max<int64_t>(freq_stated, 1);
    for (int64_t i = 0; i < layers; ++i)
      types.push_back(std::max<int64_t>(i - offset + 1, 0) % freq == 0 ? "full" : kShared);
  }
  if (!types.empty() && types.front() == kShared)
    return refuse("indexer_types", "starts with a shared layer, which has no earlier top-k to reuse; make layer 0 full");
  c.layer_types = std::move(types);
  return c;
}

}  // namespace

}  // namespace census
