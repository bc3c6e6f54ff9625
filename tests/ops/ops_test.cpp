// What each op saves, under which condition, and what its backward allocates.
#include <gtest/gtest.h>

#include "autograd/engine.h"
#include "ops/ops.h"
#include "../recording_observer.h"

namespace census {
namespace {

using testing::RecordingObserver;
using V = std::vector<std::string>;
using B = std::vector<int64_t>;

class OpsTest : public ::testing::Test {
 protected:
  OpsTest() { session.add_observer(&log); }
  Session session;
  RecordingObserver log;
};

// mul.Tensor saves `other` iff self needs grad and `self` iff other needs grad.
TEST_F(OpsTest, MulSavesEachOperandOnlyForTheOthersGradient) {
  Tensor a = make_tensor(Dims{4, 8}, DType::kBFloat16, /*requires_grad=*/true);
  Tensor b = make_tensor(Dims{4, 8}, DType::kBFloat16);
  Tensor c = ops::mul(a, b);
  EXPECT_EQ(log.saved, V{"bfloat16[4, 8]"});  // b, for a's gradient
  log.saved.clear();
  Tensor d = ops::mul(b, b);
  EXPECT_TRUE(log.saved.empty());  // no input needs grad: no node, nothing saved
  EXPECT_EQ(d.grad_fn(), nullptr);
  Tensor w = make_tensor(Dims{8}, DType::kBFloat16, true);
  Tensor e = ops::mul(w, a);
  EXPECT_EQ(log.saved.size(), 2u);
}

// mm saves self iff mat2 needs grad, mat2 iff self needs grad (derivatives.yaml's guards).
TEST_F(OpsTest, MmSavesTheInputForTheWeightsGradient) {
  Tensor x = make_tensor(Dims{16, 8}, DType::kBFloat16);  // an activation needing no grad
  Tensor w = make_parameter(Dims{4, 8}, "proj.weight");
  Tensor y = ops::mm(x, ops::t(w));
  ASSERT_EQ(log.saved.size(), 1u);
  EXPECT_EQ(log.saved[0], "bfloat16[16, 8]");
}

// rsqrt, sigmoid-like ops save their result; pow and silu their input; _to_copy, add and (in
// torch 2) mean save nothing on the device.
TEST_F(OpsTest, SavedSetsOfUnaryOps) {
  Tensor x = make_tensor(Dims{2, 6}, DType::kBFloat16, true);
  Tensor h = ops::to(x, DType::kFloat32);
  EXPECT_TRUE(log.saved.empty());
  Tensor p = ops::pow(h, 2);
  EXPECT_EQ(log.saved, V{"float32[2, 6]"});
  Tensor m = ops::mean(p, -1, true);
  Tensor r = ops::rsqrt(ops::add(m, 1e-6));
  EXPECT_EQ(log.saved, (V{"float32[2, 6]", "float32[2, 1]"}));
  Tensor s = ops::silu(x);
  EXPECT_EQ(log.saved.back(), "bfloat16[2, 6]");
  EXPECT_EQ(log.saved.size(), 3u);
}

// The flash contract saves q, k, v, its output and both fp32 statistics, after it ran.
TEST_F(OpsTest, FlashAttentionSavesInputsOutputAndStatistics) {
  Tensor q = make_tensor(Dims{1, 8, 16, 32}, DType::kBFloat16, true);
  Tensor k = make_tensor(Dims{1, 2, 16, 32}, DType::kBFloat16, true);
  Tensor v = make_tensor(Dims{1, 2, 16, 32}, DType::kBFloat16, true);
  ops::FlashOutputs out = ops::flash_attention(q, k, v);
  EXPECT_EQ(log.saved, (V{"bfloat16[1, 8, 16, 32]", "bfloat16[1, 2, 16, 32]", "bfloat16[1, 2, 16, 32]",
                          "bfloat16[1, 8, 16, 32]", "float32[1, 8, 16, 8]", "float32[1, 8, 16, 8]"}));
  EXPECT_EQ(out.softmax_a.grad_fn(), nullptr);  // statistics are not differentiable
}

// Views alias; a reshape that strides cannot express copies (clone + _unsafe_view).
TEST_F(OpsTest, ReshapeCopiesOnlyWhenStridesForbidAView) {
  Tensor x = make_tensor(Dims{2, 3, 4}, DType::kBFloat16);
  Tensor flat = ops::reshape(x, Dims{6, 4});
  EXPECT_EQ(flat.storage(), x.storage());
  Tensor transposed = ops::transpose(x, 0, 1);  // (3, 2, 4), not contiguous
  Tensor copied = ops::reshape(transposed, Dims{6, 4});
  EXPECT_NE(copied.storage(), x.storage());
  EXPECT_EQ(log.ops.back(), "aten._unsafe_view.default bfloat16[6, 4]");
}

// pow(x, 2)'s backward: x.pow(1), 2 * that, grad * that; the two temporaries die with the formula.
TEST_F(OpsTest, PowBackwardAllocatesThreeAndKeepsOne) {
  Tensor x = make_tensor(Dims{4, 4}, DType::kFloat32, true);
  Tensor y = ops::pow(x, 2);
  Tensor grad = make_tensor(Dims{4, 4}, DType::kFloat32);
  log.allocated.clear();
  log.freed.clear();
  run_backward(y, grad);
  // pow(1), mul.Scalar, mul.Tensor; then x.grad is stolen from the product (nothing else holds it).
  EXPECT_EQ(log.allocated, (B{64, 64, 64}));
  EXPECT_EQ(log.freed, (B{64, 64}));  // the two temporaries; x stays saved by y's node until released
  EXPECT_TRUE(x.grad().defined());
}

// mean's backward materialises the expanded gradient with one division: the input's size.
TEST_F(OpsTest, MeanBackwardAllocatesTheInputSize) {
  Tensor x = make_tensor(Dims{8, 16}, DType::kFloat32, true);
  Tensor m = ops::mean(x, -1, true);
  Tensor grad = make_tensor(Dims{8, 1}, DType::kFloat32);
  log.allocated.clear();
  run_backward(m, grad);
  EXPECT_EQ(log.allocated, B{8 * 16 * 4});
}

// A slice's backward allocates zeros of the whole input.
TEST_F(OpsTest, SliceBackwardAllocatesTheWholeInput) {
  Tensor x = make_tensor(Dims{4, 32}, DType::kBFloat16, true);
  Tensor half = ops::slice(x, -1, 0, 16);
  Tensor grad = make_tensor(Dims{4, 16}, DType::kBFloat16);
  log.allocated.clear();
  run_backward(half, grad);
  EXPECT_EQ(log.allocated, B{4 * 32 * 2});
}

// A broadcast operand's gradient is summed back to its shape (validate_outputs' sum_to), and cast to
// its dtype when the product promoted it.
TEST_F(OpsTest, BroadcastGradientIsReducedAndCast) {
  Tensor w = make_parameter(Dims{8}, "norm.weight");
  Tensor y = make_tensor(Dims{2, 4, 8}, DType::kBFloat16, true);
  Tensor out = ops::mul(w, y);
  Tensor grad = make_tensor(Dims{2, 4, 8}, DType::kBFloat16);
  log.allocated.clear();
  run_backward(out, grad);
  // grad * y (w's, full size), grad * w (y's), then sum_to (8) for w.
  EXPECT_EQ(log.allocated, (B{128, 128, 16}));
  EXPECT_EQ(w.grad().sizes(), (Dims{8}));
}

}  // namespace
}  // namespace census
