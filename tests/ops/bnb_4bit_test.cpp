// bitsandbytes' 4-bit product (ops/bnb_4bit.cpp) on one Linear small enough to follow by hand: N = 512 out of
// K = 256, n = 131,072 elements in 2,048 blocks of 64, double-quantized (a uint8 absmax, a second level of 8
// blocks of 256), dequantized to bf16. Each release line as it runs on CUDA; the whole steps are compared with
// the QLoRA oracle's cases (tests/data/step/steady/*_qlora_*).
#include <gtest/gtest.h>

#include "autograd/engine.h"
#include "ops/ops.h"
#include "../recording_observer.h"

namespace census {
namespace {

using testing::RecordingObserver;

constexpr int64_t kN = 512, kK = 256, kBlocks = kN * kK / 64;

// The packed weight ((n + 1) / 2 uint8, a frozen parameter) and its state, an input of `tokens` tokens that
// requires grad, the product under `version`, in a session whose every op is recorded.
struct Product4bit {
  Session session;
  RecordingObserver seen;
  Tensor input;
  Tensor packed;
  ops::QuantState4bit state;
  Tensor output;
  Product4bit(int64_t tokens, ops::BnbVersion version) {
    packed = make_tensor(Dims{kN * kK / 2, 1}, DType::kUInt8);
    state.shape = Dims{kN, kK};
    state.dtype = DType::kBFloat16;
    state.absmax = make_tensor(Dims{kBlocks}, DType::kUInt8);
    state.code = make_tensor(Dims{16}, DType::kFloat32);
    state.offset = make_tensor(Dims{}, DType::kFloat32);
    state.state2_absmax = make_tensor(Dims{kBlocks / 256}, DType::kFloat32);
    state.state2_code = make_tensor(Dims{256}, DType::kFloat32);
    input = make_tensor(Dims{1, tokens, kK}, DType::kBFloat16, true);
    session.add_observer(&seen);
    output = ops::bnb_matmul_4bit(input, packed, Tensor(), state, version);
  }
};

// A 3-d input's product is mm on its rows, then _unsafe_view of mm's output (its storage, which the recorder
// lists again).
std::vector<int64_t> product(int64_t bytes) { return {bytes, bytes}; }

// 0.50's fused kernel at 128 tokens: its output alone, (128, 512) bf16. Nothing saved but the packed weight.
TEST(Bnb4bit, TheFusedKernelMakesItsOutputAlone) {
  Product4bit p(128, ops::BnbVersion::k0_50);
  EXPECT_EQ(p.seen.allocated, (std::vector<int64_t>{128 * kN * 2}));
  EXPECT_EQ(p.seen.saved, (std::vector<std::string>{"uint8[65536, 1]"}));
}

// Past 1536 tokens its fallback: an fp32 absmax (2,048 x 4 B), its sum with the offset (as much), the bf16
// weight (512 x 256 x 2 B), then F.linear's (2,048, 512) bf16 output; the three go as it returns.
TEST(Bnb4bit, PastFifteenHundredTokensTheFallbackDequantizesTheWeight) {
  Product4bit p(2048, ops::BnbVersion::k0_50);
  std::vector<int64_t> expected{kBlocks * 4, kBlocks * 4, kN * kK * 2};
  for (int64_t b : product(2048 * kN * 2)) expected.push_back(b);
  EXPECT_EQ(p.seen.allocated, expected);
  EXPECT_EQ(p.seen.freed, (std::vector<int64_t>{kN * kK * 2, kBlocks * 4, kBlocks * 4}));
}

// 0.49 dequantizes at every size: dequantize_blockwise's fp32 absmax (+= offset in place), the bf16 weight (no
// copy: the input is bf16 too), F.linear's output; the absmax goes as dequantize_4bit returns.
TEST(Bnb4bit, OlderReleasesDequantizeInEveryForward) {
  Product4bit p(128, ops::BnbVersion::k0_49);
  std::vector<int64_t> expected{kBlocks * 4, kN * kK * 2};
  for (int64_t b : product(128 * kN * 2)) expected.push_back(b);
  EXPECT_EQ(p.seen.allocated, expected);
  EXPECT_EQ(p.seen.freed, (std::vector<int64_t>{kBlocks * 4, kN * kK * 2}));
}

// The backward, both lines: the weight dequantized again (the fp32 absmax, the bf16 weight), then
// grad_output @ weight, the input's (128, 256) bf16 gradient. The weight gets none.
TEST(Bnb4bit, TheBackwardDequantizesTheWeightAgain) {
  for (ops::BnbVersion version : {ops::BnbVersion::k0_49, ops::BnbVersion::k0_50}) {
    Product4bit p(128, version);
    const Tensor grad_output = make_tensor(Dims{1, 128, kN}, DType::kBFloat16);
    const size_t forward = p.seen.allocated.size();
    run_backward(p.output, grad_output);
    const std::vector<int64_t> backward(p.seen.allocated.begin() + static_cast<int64_t>(forward), p.seen.allocated.end());
    std::vector<int64_t> expected{kBlocks * 4, kN * kK * 2};
    for (int64_t b : product(128 * kK * 2)) expected.push_back(b);
    EXPECT_EQ(backward, expected);
  }
}

}  // namespace
}  // namespace census
