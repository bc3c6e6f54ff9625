// Seed-OSS (transformers/models/seed_oss/modeling_seed_oss.py, Transformers 5): Llama's layer with
// biased q/k/v projections (attention_bias), an unbiased o_proj (attention_out_bias), and dropout in
// training: residual_dropout on the attention's output (after o_proj) and on the MLP's (after
// down_proj), each keeping its noise tensor for the backward; attention_dropout goes to the attention
// function, whose flash contract saves what it saves without it.
#include "models/llama.h"
#include "ops/ops.h"

namespace census {
namespace {

// SeedOssMLP: Llama's gated MLP, its output dropped out in the module.
class SeedOssMLP final : public nn::FeedForward {
 public:
  SeedOssMLP(const ModelConfig& c, nn::ParameterList& params)
      : mlp_("mlp", c.hidden_size, c.intermediate_size, c.mlp_bias, params, c.hidden_act),
        residual_dropout_(c.residual_dropout) {}
  Tensor forward(const Tensor& x) const override {
    ModuleScope scope("mlp", ModuleKind::kOther);
    return ops::dropout(mlp_.forward(x), residual_dropout_);
  }

 private:
  nn::GatedMLP mlp_;  // gate_proj, up_proj, down_proj, act_fn
  double residual_dropout_;
};

std::unique_ptr<nn::FeedForward> build_seed_oss_mlp(const ModelConfig& c, int64_t /*index*/, nn::ParameterList& params) {
  return std::make_unique<SeedOssMLP>(c, params);
}

Result<ModelConfig> read_seed_oss(const ConfigReader& r);

std::unique_ptr<DecoderLayer> build_seed_oss_layer(const ModelConfig& config, int64_t index) {
  return std::make_unique<LlamaDecoderLayer>(config, index, build_seed_oss_mlp);
}

}  // namespace

CENSUS_FAMILY(kSeedOssFamily) = {.model_type = "seed_oss", .read = read_seed_oss, .build_layer = build_seed_oss_layer,
                                 .build_final_norm = build_llama_final_norm, .peft_lora = true, .autocast = true};

namespace {

// SeedOssConfig: Seed-OSS-36B's sizes by default, head_dim 128, q/k/v biased and o_proj not, dropout
// 0.1 on the residual branches.
Result<ModelConfig> read_seed_oss(const ConfigReader& r) {
  CENSUS_ASSIGN(ModelConfig c, read_llama_like(r, kSeedOssFamily, {155136, 4096, 27648, 64, 80, 8, 128}));
  CENSUS_ASSIGN(c.qkv_bias, r.flag("attention_bias", true));
  CENSUS_ASSIGN(c.o_bias, r.flag("attention_out_bias", false));
  CENSUS_ASSIGN(c.mlp_bias, r.flag("mlp_bias", false));
  CENSUS_ASSIGN(c.residual_dropout, r.probability("residual_dropout", 0.1));
  CENSUS_ASSIGN(const double attention_dropout, r.probability("attention_dropout", 0.1));  // checked, not priced
  (void)attention_dropout;
  return c;
}

}  // namespace
}  // namespace census
