// PEFT's LoRA in a whole step (census step --lora), derived by hand on the Llama toy of the LoRA oracle's
// cases (tests/data/step/steady/*_lora_*, where every case is compared whole by step_steady_oracle_test.cpp):
// hidden 256, 8 heads and 2 KV heads of 32, intermediate 512, vocabulary 4,096, 4 layers; 128 tokens.
//
// The model's 4,327,680 parameters (the embedding and the head 4,096 x 256 each, a layer's 557,568: q and o
// 256 x 256, k and v 64 x 256, gate, up and down 512 x 256, two norms; the final norm 256) are frozen, bf16:
// 8,655,360 B. PEFT's defaults adapt q_proj and v_proj at r 8, in fp32: q's lora_A (8, 256) and lora_B
// (256, 8), v's lora_A (8, 256) and lora_B (64, 8), 6,656 a layer, 26,624 in all, 106,496 B.
#include <gtest/gtest.h>

#include <tuple>

#include "models/registry.h"
#include "step/step_census.h"
#include "step_cases.h"

namespace census {
namespace {

constexpr int64_t kFrozen = 4'327'680, kAdapters = 26'624;

ModelConfig llama_toy() {
  return testing::case_config("llama_toy_L4_s128_single_adamw_lora_steady", "step/steady");
}

StepOptions adapted(nn::LoraConfig lora = {}) {
  StepOptions o;
  o.seq_length = 128;
  o.optimizer = StepOptimizer::kAdamW;
  o.optimizer_impl = nn::OptimizerImpl::kForLoop;
  o.lora = lora;
  return o;
}

// The optimizer steps the adapters alone: their exp_avg and exp_avg_sq in fp32 (2 x 106,496 B) and 16 fp32
// step counts, alive from the start; the backward leaves their fp32 gradients (106,496 B) and no other.
TEST(StepLora, TheAdaptersAloneHaveGradientsAndStates) {
  const StepCensus s = testing::step_or_throw(llama_toy(), adapted());
  EXPECT_EQ(s.parameter_count, kFrozen + kAdapters);
  EXPECT_EQ(s.parameter_bytes, 2 * kFrozen + 4 * kAdapters);
  EXPECT_EQ(s.adapted_linears, 8);
  EXPECT_EQ(s.trainable_parameter_count, kAdapters);
  EXPECT_EQ(s.trainable_parameter_bytes, 4 * kAdapters);
  EXPECT_EQ(s.optimizer_state_bytes, 2 * 4 * kAdapters + 16 * 4);
  EXPECT_EQ(s.gradient_bytes_after_last_backward, 4 * kAdapters);
  EXPECT_EQ(s.gradient_bytes_at_end, 0);  // zero_grad(set_to_none=True)
}

// bf16 adapters (autocast_adapter_dtype=False): the same parameters at 2 B, and their states in bf16.
TEST(StepLora, Bf16AdaptersHalveTheirBytes) {
  nn::LoraConfig lora;
  lora.dtype = DType::kBFloat16;
  const StepCensus s = testing::step_or_throw(llama_toy(), adapted(lora));
  EXPECT_EQ(s.trainable_parameter_bytes, 2 * kAdapters);
  EXPECT_EQ(s.optimizer_state_bytes, 2 * 2 * kAdapters + 16 * 4);
}

// DoRA adds a magnitude vector of each adapted Linear's out features: q's 256 and v's 64, 1,280 in all.
TEST(StepLora, DoraAddsAMagnitudeAnOutputWide) {
  nn::LoraConfig lora;
  lora.use_dora = true;
  const StepCensus s = testing::step_or_throw(llama_toy(), adapted(lora));
  EXPECT_EQ(s.trainable_parameter_count, kAdapters + 4 * (256 + 64));
  EXPECT_EQ(s.adapted_linears, 8);
}

// all-linear adapts every Linear but the head: 7 a layer, 28 in all.
TEST(StepLora, AllLinearAdaptsEveryLinearButTheHead) {
  nn::LoraConfig lora;
  lora.all_linear = true;
  const StepCensus s = testing::step_or_throw(llama_toy(), adapted(lora));
  EXPECT_EQ(s.adapted_linears, 28);
  // r (in + out) for q, k, v, o, gate, up, down: 8 x (512 + 320 + 320 + 512 + 768 + 768 + 768) a layer
  EXPECT_EQ(s.trainable_parameter_count, 4 * 8 * (512 + 320 + 320 + 512 + 768 + 768 + 768));
}

// modules_to_save (PEFT's ModulesToSaveWrapper): the head's original 4,096 x 256 stays, frozen, beside its
// trained copy in the same bf16, 1,048,576 parameters more. The copy has a gradient (2,097,152 B, bf16) and
// AdamW's two bf16 moments and a step count; the embedding's alike where it is saved too.
TEST(StepLora, ModulesToSaveTrainACopyBesideTheFrozenOriginal) {
  constexpr int64_t kTable = 4096 * 256;
  nn::LoraConfig lora;
  lora.modules_to_save = {"lm_head"};
  StepCensus s = testing::step_or_throw(llama_toy(), adapted(lora));
  EXPECT_EQ(s.parameter_count, kFrozen + kAdapters + kTable);
  EXPECT_EQ(s.parameter_bytes, 2 * kFrozen + 4 * kAdapters + 2 * kTable);
  EXPECT_EQ(s.trainable_parameter_count, kAdapters + kTable);
  EXPECT_EQ(s.gradient_bytes_after_last_backward, 4 * kAdapters + 2 * kTable);
  EXPECT_EQ(s.optimizer_state_bytes, 2 * 4 * kAdapters + 2 * 2 * kTable + 17 * 4);
  lora.modules_to_save = {"embed_tokens", "lm_head"};
  s = testing::step_or_throw(llama_toy(), adapted(lora));
  EXPECT_EQ(s.trainable_parameter_count, kAdapters + 2 * kTable);
  EXPECT_EQ(s.gradient_bytes_after_last_backward, 4 * kAdapters + 2 * 2 * kTable);
}

// A module to save other than the head and the embedding, one that is also a target, or one on a tied head is
// refused by name.
TEST(StepLora, BadModulesToSaveAreRefusedByName) {
  for (const auto& [saved, targets, refusal] :
       {std::tuple{"model.norm", "", "--modules-to-save 'model.norm': "},
        std::tuple{"lm_head", "lm_head", "--modules-to-save lm_head: is also a LoRA target"}}) {
    nn::LoraConfig lora;
    lora.modules_to_save = {saved};
    if (*targets != 0) lora.target_modules = {"q_proj", targets};
    const auto refused = census_step(llama_toy(), adapted(lora));
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.refusal().message().rfind(refusal, 0), 0u) << refused.refusal().message();
  }
  ModelConfig tied = llama_toy();
  tied.tie_word_embeddings = true;
  nn::LoraConfig lora;
  lora.modules_to_save = {"embed_tokens"};
  const auto refused = census_step(tied, adapted(lora));
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.refusal().message().rfind("--modules-to-save on llama: ", 0), 0u) << refused.refusal().message();
}

// A target that names no Linear of the model is refused by name, as is LoRA on a layout it is not priced on.
TEST(StepLora, BadTargetsAndLayoutsAreRefusedByName) {
  nn::LoraConfig lora;
  lora.target_modules = {"q_proj", "embed_tokens"};
  auto refused = census_step(llama_toy(), adapted(lora));
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.refusal().message().rfind("--lora-targets embed_tokens: ", 0), 0u) << refused.refusal().message();
  StepOptions tp = adapted();
  tp.tensor_parallel = 2;
  refused = census_step(llama_toy(), tp);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.refusal().message().rfind("--lora with --tp: ", 0), 0u) << refused.refusal().message();
  // bf16 adapters on a base loaded in fp32 under the Trainer's autocast: what PEFT never makes.
  nn::LoraConfig bf16;
  bf16.dtype = DType::kBFloat16;
  StepOptions autocast = adapted(bf16);
  autocast.autocast = true;
  refused = census_step(llama_toy(), autocast);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.refusal().message().rfind("--lora-dtype bf16 with --autocast: ", 0), 0u)
      << refused.refusal().message();
}

}  // namespace
}  // namespace census
