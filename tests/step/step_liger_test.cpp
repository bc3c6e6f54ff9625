// census step --liger (nn/liger_kernels.h), each number derived here by hand on the Llama toy of the steady-state
// oracle's cases (tests/data/step/steady/, where every case of Liger's patch is compared whole by
// step_steady_oracle_test.cpp).
//
// The toy: hidden H = 256, intermediate I = 512, 4 layers, 8 query heads and 2 key-value heads of 32; one
// sequence of S = 600 tokens. No optimizer: the step is the forward and the backward; the loss is
// Transformers' own (--loss hf) unless said otherwise.
#include <gtest/gtest.h>

#include "models/registry.h"
#include "step/step_census.h"
#include "step_cases.h"

namespace census {
namespace {

constexpr int64_t kS = 600, kH = 256, kI = 512, kLayers = 4;

ModelConfig llama_toy(bool liger) {
  auto config = read_config(testing::step_case("llama_toy_L4_s600_single_adamw_liger_steady", "step/steady").at("config"));
  if (!config) throw std::runtime_error(config.refusal().message());
  config->liger.rms_norm = config->liger.swiglu = config->liger.rope = liger;
  return config.take();
}

StepCensus run(bool liger, nn::CausalLMLoss loss = nn::CausalLMLoss::kForCausalLM) {
  StepOptions o;
  o.seq_length = kS;
  o.optimizer = StepOptimizer::kNone;
  o.loss = loss;
  return testing::step_or_throw(llama_toy(liger), o);
}

// What the forward leaves saved, kernel by kernel, against Transformers' eager modules:
//   RMSNorm  eager: the fp32 copy of its input (S, H), kept by pow and mul         4 S H
//                   its rstd (S, 1) fp32, kept by rsqrt and mul                      4 S
//                   the normalized input cast back (S, H) bf16, kept by the weight's mul  2 S H
//            Liger: its input itself (S, H) bf16, which nothing else keeps           2 S H
//                   RSTD (S) fp32                                                      4 S
//            so 4 S H = 614,400 B fewer a norm: two a layer and the final norm's.
//   SwiGLU   eager: gate, silu(gate), up and their product, (S, I) bf16 each       8 S I
//            Liger: gate and up (the product, c, down_proj keeps in both)          6 S I
//            so 2 S I = 614,400 B fewer a layer.
//   RoPE     both keep cos and sin, the model's, and a q and a k for the attention: nothing differs.
// 4 layers x (2 x 614,400 + 614,400) + 614,400 = 7,987,200 B.
TEST(StepLiger, TheKernelsSaveLessThanTheEagerModules) {
  const StepCensus eager = run(false), liger = run(true);
  const int64_t norm = 4 * kS * kH, mlp = 2 * kS * kI;
  EXPECT_EQ(eager.analysis.phases[1].live_at_end - liger.analysis.phases[1].live_at_end,
            kLayers * (2 * norm + mlp) + norm);  // 7,987,200
}

// --liger's loss is Liger's fused linear cross-entropy: what the forward leaves saved is the kernels' saves
// (above) with the fused loss's in place of the whole logits' (step_losses_test.cpp): 10,142,412 B of the
// logits' loss less the two gradients Liger's keeps, (S, H) and (V, H) bf16, 307,200 + 2,097,152 B.
TEST(StepLiger, WithTheFusedLossSavesLessAgain) {
  const StepCensus eager = run(false), liger = run(true, nn::CausalLMLoss::kLigerFlce);
  const int64_t kV = 4'096;
  const int64_t hf_loss = kS * kV * 4 + (kS + 1) * 8 + 4 + kS * kH * 2, liger_loss = kS * kH * 2 + kV * kH * 2;
  EXPECT_EQ(eager.analysis.phases[1].live_at_end - liger.analysis.phases[1].live_at_end,
            7'987'200 + hf_loss - liger_loss);
}

// The families whose patch is Llama's are priced; another's is refused by name, as are the layouts and
// policies not checked against the oracle.
TEST(StepLiger, RefusesWhatItDoesNotPrice) {
  // Phi-3's patch puts LigerPhi3SwiGLUMLP on its fused gate and up projection, which is not priced.
  auto phi3 = read_config(nlohmann::json{{"model_type", "phi3"}, {"hidden_size", 64}, {"intermediate_size", 128},
                                         {"num_hidden_layers", 2}, {"num_attention_heads", 4},
                                         {"num_key_value_heads", 2}, {"vocab_size", 512}});
  ASSERT_TRUE(phi3) << phi3.refusal().message();
  phi3->liger.rms_norm = phi3->liger.swiglu = phi3->liger.rope = true;
  StepOptions o;
  o.seq_length = 64;
  auto refused = census_step(*phi3, o);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.refusal().message().rfind("--liger on phi3: ", 0), 0u) << refused.refusal().message();

  const ModelConfig toy = llama_toy(true);
  for (const auto& [set, flag] : std::vector<std::pair<std::function<void(StepOptions&)>, std::string>>{
           {[](StepOptions& s) { s.tensor_parallel = 2; }, "--liger with --tp"},
           {[](StepOptions& s) { s.recompute = Recompute::kTorchtitanOp; }, "--liger with --recompute torchtitan-op"},
           {[](StepOptions& s) { s.offload_activations = OffloadPolicy::kTorchtune; },
            "--liger with --offload-activations torchtune"}}) {
    StepOptions s;
    s.seq_length = 64;
    set(s);
    auto step = census_step(toy, s);
    ASSERT_FALSE(step) << flag;
    EXPECT_EQ(step.refusal().message().rfind(flag + ": ", 0), 0u) << step.refusal().message();
  }
}

}  // namespace
}  // namespace census
