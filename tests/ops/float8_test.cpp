// torchao's Float8Linear (ops/float8.cpp) on one Linear small enough to follow by hand: 128 tokens of width
// K = 256 into N = 512, bf16, as pytorch/ao 36027d82d runs it in eager mode (float8_linear.py,
// float8_scaling_utils.py, float8_utils.py, float8_ops.py). The whole steps are compared with the parallel
// oracle's FP8 cases (tests/data/step/parallel/*_fp8_*).
#include <gtest/gtest.h>

#include <algorithm>

#include "autograd/engine.h"
#include "ops/ops.h"
#include "../recording_observer.h"

namespace census {
namespace {

using testing::RecordingObserver;

constexpr int64_t kM = 128, kK = 256, kN = 512;

// A cast of n bf16 elements, tensorwise (hp_tensor_to_float8_dynamic): abs (2n), its max (a 2 B bf16
// scalar), the scale's arithmetic in fp64 (amax.to(float64), clamp, reciprocal, the product: 8 B each) and
// its fp32 copy (4 B), then x.to(float32) (4n), times the scale (4n), clamped (4n), cast to float8 (n).
std::vector<int64_t> tensorwise_cast(int64_t n) {
  return {2 * n, 2, 8, 8, 8, 8, 4, 4 * n, 4 * n, 4 * n, n};
}

// One Linear's input (1, M, K) and weight (N, K), its Float8Linear's output under `recipe`, in a session
// whose every op is recorded.
struct Float8Step {
  Session session;
  RecordingObserver seen;
  Tensor input;
  Tensor weight;
  Tensor output;
  explicit Float8Step(ops::Float8Recipe recipe) {
    session.add_observer(&seen);
    input = make_tensor(Dims{1, kM, kK}, DType::kBFloat16, true);
    weight = make_parameter(Dims{kN, kK}, "proj.weight");
    output = ops::float8_linear(input, weight, Tensor(), recipe);
  }
  void backward() { run_backward(output, make_tensor(Dims{1, kM, kN}, DType::kBFloat16)); }
};

// The forward: the input's cast, the weight's (its transpose, column-major: no copy for _scaled_mm), the two
// scales' reciprocals (4 B each) and the bf16 output. It saves the bf16 input and the weight's transpose, as
// a bf16 nn.Linear does, and leaves only the output: the casts and their fp8 results go as it returns.
TEST(Float8, TheForwardCastsBothOperandsAndSavesThemInBf16) {
  Float8Step step(ops::Float8Recipe::kTensorwise);
  const RecordingObserver& seen = step.seen;
  std::vector<int64_t> expected = tensorwise_cast(kM * kK);
  for (int64_t b : tensorwise_cast(kN * kK)) expected.push_back(b);
  for (int64_t b : {int64_t{4}, int64_t{4}, kM * kN * 2}) expected.push_back(b);
  EXPECT_EQ(seen.allocated, expected);
  EXPECT_EQ(seen.saved, (std::vector<std::string>{"bfloat16[1, 128, 256]", "bfloat16[256, 512]"}));
  int64_t allocated = 0, freed = 0;
  for (int64_t b : seen.allocated) allocated += b;
  for (int64_t b : seen.freed) freed += b;
  EXPECT_EQ(allocated - freed, kM * kN * 2);  // the output alone
  EXPECT_EQ(step.output.sizes(), (Dims{1, kM, kN}));
  EXPECT_EQ(step.output.dtype(), DType::kBFloat16);
}

// The backward, tensorwise: grad_output cast (to e5m2), the weight cast again, its fp8 transpose made
// row-major for _scaled_mm (a contiguous copy, N x K bytes), grad_input; then grad_output and the input cast
// again for grad_weight, each fp8 operand made as _scaled_mm lays it out (two copies), and grad_weight.
TEST(Float8, TheBackwardCastsAgainAndCopiesTheOperandsItTransposes) {
  Float8Step step(ops::Float8Recipe::kTensorwise);
  const RecordingObserver& seen = step.seen;
  const size_t before = seen.allocated.size();
  step.backward();
  std::vector<int64_t> expected = tensorwise_cast(kM * kN);
  for (int64_t b : tensorwise_cast(kN * kK)) expected.push_back(b);
  for (int64_t b : {kN * kK, int64_t{4}, int64_t{4}, kM * kK * 2}) expected.push_back(b);  // copy, 1/scales, grad_input
  for (int64_t b : tensorwise_cast(kM * kN)) expected.push_back(b);
  for (int64_t b : tensorwise_cast(kM * kK)) expected.push_back(b);
  for (int64_t b : {kM * kN, kM * kK, int64_t{4}, int64_t{4}, kN * kK * 2}) expected.push_back(b);
  EXPECT_EQ(std::vector<int64_t>(seen.allocated.begin() + static_cast<std::ptrdiff_t>(before), seen.allocated.end()),
            expected);
  ASSERT_TRUE(step.weight.grad().defined());
  EXPECT_EQ(step.weight.grad().sizes(), step.weight.sizes());
  EXPECT_TRUE(step.weight.grad().is_contiguous());
}

// Rowwise, the grad_input product: two axiswise operands without fast accumulation, so the scales'
// reciprocals, (M, 1) and (1, K), are multiplied into an (M, K) fp32 outer product, applied to the output
// in place after a tensorwise _scaled_mm whose scales are ones (two 4 B new_ones).
TEST(Float8, RowwiseBackwardScalesByAnOuterProduct) {
  Float8Step step(ops::Float8Recipe::kRowwise);
  std::vector<std::string>& ops = step.seen.ops;
  ops.clear();
  step.backward();
  const auto at = std::find(ops.begin(), ops.end(), "aten.mul.Tensor float32[128, 256]");
  ASSERT_NE(at, ops.end());
  EXPECT_EQ(*(at + 1), "aten.new_ones.default float32[]");
  EXPECT_EQ(*(at + 2), "aten.new_ones.default float32[]");
  EXPECT_EQ(*(at + 3), "aten._scaled_mm.default bfloat16[128, 256]");
  EXPECT_EQ((at + 4)->rfind("aten.mul_.Tensor", 0), 0u);
}

}  // namespace
}  // namespace census
