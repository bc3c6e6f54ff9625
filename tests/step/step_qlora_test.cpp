// bitsandbytes' 4-bit base under PEFT's LoRA in a whole step (census step --quantize), derived by hand on the
// Llama toy of the QLoRA oracle's cases (tests/data/step/steady/*_qlora_*, where every case is compared whole
// by step_steady_oracle_test.cpp): hidden 256, 8 heads and 2 KV heads of 32, intermediate 512, vocabulary
// 4,096, 4 layers; 128 tokens.
//
// Each layer's seven Linears are quantized (the head is not): q and o of n = 65,536 elements, k and v of
// 16,384, gate, up and down of 131,072; 557,056 a layer, 2,228,224 in all. Packed two to a byte: 1,114,112 B,
// whatever the storage dtype. The rest stays bf16: the embedding and the head 4,096 x 256 each, two norms a
// layer and the final one, 2,099,456 elements, 4,198,912 B.
#include <gtest/gtest.h>

#include "models/registry.h"
#include "step/step_census.h"
#include "step_cases.h"

namespace census {
namespace {

constexpr int64_t kPacked = 1'114'112, kUnquantizedBf16 = 4'198'912;

ModelConfig llama_toy() {
  return testing::case_config("llama_toy_L4_s128_single_adamw_qlora_all_steady", "step/steady");
}

// all-linear adapters at r 16, fp32, over a 4-bit base.
StepOptions qlora(nn::Bnb4bitConfig quantize) {
  StepOptions o;
  o.seq_length = 128;
  o.optimizer = StepOptimizer::kAdamW;
  o.optimizer_impl = nn::OptimizerImpl::kForLoop;
  nn::LoraConfig lora;
  lora.r = 16;
  lora.alpha = 32;
  lora.all_linear = true;
  o.lora = lora;
  o.quantize = quantize;
  return o;
}

nn::Bnb4bitConfig recipe() {  // the QLoRA recipe: nf4, double quantization, bf16 compute
  nn::Bnb4bitConfig q;
  q.quant_type = nn::Bnb4bitType::kNf4;
  q.double_quant = true;
  q.compute_dtype = DType::kBFloat16;
  return q;
}

// The adapters of a layer: r x (in + out) for each Linear, 16 x (512 + 320 + 320 + 512 + 768 + 768 + 768).
constexpr int64_t kAdapters = 4 * 16 * (512 + 320 + 320 + 512 + 768 + 768 + 768);

// With double quantization a Linear of n elements keeps, in blocks of 64: a uint8 absmax (n / 64 B), the
// 4-bit code (16 fp32, 64 B), the fp32 offset (4 B), the second level's fp32 absmax over blocks of 256
// (4 x ceil(n / 64 / 256) B) and its copy of the dynamic map (256 fp32, 1,024 B). The map itself once more.
TEST(StepQlora, DoubleQuantizationKeepsAnEightBitAbsmaxAndASecondLevel) {
  const StepCensus s = testing::step_or_throw(llama_toy(), qlora(recipe()));
  const auto nested = [](int64_t n) { return n / 64 + 64 + 4 + 4 * ((n / 64 + 255) / 256) + 1'024; };
  EXPECT_EQ(nested(65'536), 2'132);
  const int64_t state = 4 * (2 * nested(65'536) + 2 * nested(16'384) + 3 * nested(131'072)) + 1'024;
  EXPECT_EQ(state, 66'960);
  EXPECT_EQ(s.quantized_linears, 28);
  EXPECT_EQ(s.quantized_weight_bytes, kPacked);
  EXPECT_EQ(s.quantization_state_bytes, state);
  EXPECT_EQ(s.buffer_bytes, state + 128);  // and the rotary's two buffers
  EXPECT_EQ(s.parameter_bytes, kPacked + kUnquantizedBf16 + 4 * kAdapters);
  EXPECT_EQ(s.trainable_parameter_bytes, 4 * kAdapters);
  // The packed weights have no gradient: the backward leaves the adapters' alone.
  EXPECT_EQ(s.gradient_bytes_after_last_backward, 4 * kAdapters);
}

// Without it (BitsAndBytesConfig's default) the absmax is fp32, 4 B a block, and the code alone beside it.
TEST(StepQlora, WithoutDoubleQuantizationTheAbsmaxIsFp32) {
  const StepCensus s = testing::step_or_throw(llama_toy(), qlora(nn::Bnb4bitConfig{}));
  const auto plain = [](int64_t n) { return 4 * (n / 64) + 64; };
  EXPECT_EQ(s.quantization_state_bytes, 4 * (2 * plain(65'536) + 2 * plain(16'384) + 3 * plain(131'072)));
  EXPECT_EQ(s.quantization_state_bytes, 141'056);
}

// The storage dtype holds the same bytes: bf16 [n / 4, 1], fp32 [n / 8, 1].
TEST(StepQlora, TheStorageDtypeHoldsTheSameBytes) {
  for (DType storage : {DType::kBFloat16, DType::kFloat32}) {
    nn::Bnb4bitConfig q = recipe();
    q.quant_storage = storage;
    EXPECT_EQ(testing::step_or_throw(llama_toy(), qlora(q)).quantized_weight_bytes, kPacked);
  }
}

// prepare_model_for_kbit_training casts every bf16 parameter but the packed weights to fp32: the embedding,
// the norms and the head double; the adapters PEFT adds after it are fp32 as before.
TEST(StepQlora, PrepareForKbitTrainingWidensTheRestOfTheBase) {
  nn::Bnb4bitConfig q = recipe();
  q.prepare_kbit = true;
  const StepCensus s = testing::step_or_throw(llama_toy(), qlora(q));
  EXPECT_EQ(s.parameter_bytes, kPacked + 2 * kUnquantizedBf16 + 4 * kAdapters);
  EXPECT_EQ(s.quantized_weight_bytes, kPacked);
}

}  // namespace
}  // namespace census
