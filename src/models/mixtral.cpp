// Mixtral (transformers/models/mixtral/modeling_mixtral.py, Transformers 5): Mistral's attention and,
// on every layer, MixtralSparseMoeBlock: the softmax top-k router (weights kept fp32, always
// renormalized) and the routed experts, intermediate_size wide (nn/sparse_moe_block.h).
#include "models/llama.h"
#include "models/moe_layers.h"
#include "nn/sparse_moe_block.h"

namespace census {
namespace {

Result<ModelConfig> read_mixtral(const ConfigReader& r);

// router_jitter_noise multiplies the input in place only when it is set; the census refuses it
// (read_mixtral), so the block is the router and the experts.
std::unique_ptr<nn::FeedForward> build_mixtral_mlp(const ModelConfig& c, int64_t index, nn::ParameterList& params) {
  nn::TopKRouter gate = make_topk_router(c, {/*norm_topk_prob=*/true, /*weights_in_logits_dtype=*/false}, params);
  return std::make_unique<nn::SparseMoeBlock>("mlp", std::move(gate),
                                              make_routed_experts(c, index, c.intermediate_size, params),
                                              nn::SharedExpert{}, c.hidden_size, params);
}

std::unique_ptr<DecoderLayer> build_mixtral_layer(const ModelConfig& config, int64_t index) {
  return std::make_unique<LlamaDecoderLayer>(config, index, build_mixtral_mlp);
}

}  // namespace

CENSUS_FAMILY(kMixtralFamily) = {.model_type = "mixtral", .read = read_mixtral, .build_layer = build_mixtral_layer,
                                 .build_final_norm = build_llama_final_norm, .class_prefix = "Mixtral",
                                 .names_llama_tp_plan = true,
    .liger_patches = true, .float8_linears = true,
    .peft_lora = true, .peft_expert_names = "gate,w1,w2,w3", .bnb_4bit = true, .autocast = true};  // PEFT maps q_proj,v_proj for mixtral, yet its get_peft_model finds no target on it

namespace {

// MixtralConfig: every layer MoE, experts as wide as intermediate_size, rms_norm_eps 1e-5.
Result<ModelConfig> read_mixtral(const ConfigReader& r) {
  CENSUS_ASSIGN(ModelConfig c, read_llama_like(r, kMixtralFamily, {32000, 4096, 14336, 32, 32, 8, std::nullopt}));
  CENSUS_ASSIGN(c.rms_norm_eps, r.positive_number("rms_norm_eps", 1e-5));
  // Training with jitter multiplies the router's input by noise in place, which the census does not price.
  if (r.has("router_jitter_noise") &&
      (!r.json().at("router_jitter_noise").is_number() || r.json().at("router_jitter_noise").get<double>() != 0.0))
    return refuse("router_jitter_noise", "is set; the census prices Mixtral's router without jitter (0.0)");
  CENSUS_TRY(read_routed_experts(r, "num_local_experts", "num_experts", 8, 2, c.moe));
  c.moe.norm_topk_prob = true;
  return c;
}

}  // namespace
}  // namespace census
