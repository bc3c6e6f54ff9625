// The gated delta net's ops: what each saves, under which condition, and what its backward allocates.
#include <gtest/gtest.h>

#include "autograd/checkpoint.h"
#include "autograd/engine.h"
#include "graph/node.h"
#include "ops/ops.h"
#include "../recording_observer.h"

namespace census {
namespace {

using testing::RecordingObserver;
using V = std::vector<std::string>;
using B = std::vector<int64_t>;

class GdnOpsTest : public ::testing::Test {
 protected:
  GdnOpsTest() { session.add_observer(&log); }
  Session session;
  RecordingObserver log;
};

TEST_F(GdnOpsTest, ViewsAliasAndComputeOpsAllocate) {
  Tensor x = make_tensor(Dims{2, 6, 8}, DType::kFloat32, true);
  for (const Tensor& view : {ops::select(x, 1, 3), ops::split_with_sizes(x, {2, 2, 4}, -1)[2], ops::chunk(x, 2, 1)[1]})
    EXPECT_EQ(view.storage(), x.storage());
  EXPECT_TRUE(log.allocated.empty());
  const std::vector<Tensor> computed = {ops::sub(x, x), ops::exp(x), ops::sigmoid(x), ops::softplus(x), ops::tril(x),
                                        ops::triu(x, 1), ops::cumsum(x, -1), ops::constant_pad_nd(x, {0, 2})};
  for (const Tensor& c : computed) EXPECT_NE(c.storage(), x.storage());
  EXPECT_EQ(log.allocated.size(), computed.size());
}

// exp and sigmoid save their result, softplus its input, masked_fill its mask; sub, tril, cumsum and
// a pad nothing.
TEST_F(GdnOpsTest, SavedSets) {
  Tensor x = make_tensor(Dims{4, 4}, DType::kFloat32, true);
  Tensor mask = ops::triu(ops::ones(Dims{4, 4}, DType::kBool), 0);
  for (const Tensor& t : {ops::sub(x, x), ops::tril(x), ops::cumsum(x, -1), ops::constant_pad_nd(x, {0, 4})}) (void)t;
  EXPECT_TRUE(log.saved.empty());
  Tensor e = ops::exp(x), s = ops::sigmoid(x), p = ops::softplus(x), m = ops::masked_fill(x, mask);
  EXPECT_EQ(log.saved, (V{"float32[4, 4]", "float32[4, 4]", "float32[4, 4]", "bool[4, 4]"}));
}

// bmm saves each operand for the other's gradient only; the convolution saves its input and weight.
TEST_F(GdnOpsTest, BmmAndConvolutionSaves) {
  Tensor a = make_tensor(Dims{3, 4, 5}, DType::kFloat32, true);
  Tensor state = make_tensor(Dims{3, 5, 6}, DType::kFloat32);  // the delta rule's first state: no grad
  Tensor y = ops::bmm(a, state);
  EXPECT_EQ(log.saved, V{"float32[3, 5, 6]"});
  log.saved.clear();
  Tensor input = make_tensor(Dims{1, 8, 16}, DType::kBFloat16, true);
  Tensor weight = make_parameter(Dims{8, 1, 4}, "conv1d.weight");
  Tensor out = ops::conv1d_depthwise(input, weight, 3);
  EXPECT_EQ(out.sizes(), (Dims{1, 8, 19}));
  EXPECT_EQ(log.saved, (V{"bfloat16[1, 8, 16]", "bfloat16[8, 1, 4]"}));
}

// The kernel's contract saves q, k, v, fp32 gates (B, S, H), beta and one (B, S, H, 64) matrix.
TEST_F(GdnOpsTest, GatedDeltaRuleContractSavesSix) {
  Tensor q = make_tensor(Dims{1, 16, 4, 8}, DType::kBFloat16, true);
  Tensor k = make_tensor(Dims{1, 16, 4, 8}, DType::kBFloat16, true);
  Tensor v = make_tensor(Dims{1, 16, 4, 8}, DType::kBFloat16, true);
  Tensor g = make_tensor(Dims{1, 16, 4}, DType::kFloat32, true);
  Tensor beta = make_tensor(Dims{1, 16, 4}, DType::kBFloat16, true);
  Tensor out = ops::gated_delta_rule_contract(q, k, v, g, beta, 64);
  EXPECT_EQ(log.saved, (V{"bfloat16[1, 16, 4, 8]", "bfloat16[1, 16, 4, 8]", "bfloat16[1, 16, 4, 8]",
                          "float32[1, 16, 4]", "bfloat16[1, 16, 4]", "bfloat16[1, 16, 4, 64]"}));
  log.allocated.clear();
  run_backward(out, make_tensor(out.sizes(), DType::kBFloat16));
  EXPECT_EQ(log.allocated, (B{1024, 1024, 1024, 256, 128}));  // empty_like of q, k, v, gates, beta
}

// Note [Indexed assignment]: base[i, :j] = src makes base's grad_fn a CopySlices, whose backward
// copies the gradient into base's geometry, clones the slice for src and writes zeros over it.
TEST_F(GdnOpsTest, IndexedAssignmentRebasesOntoCopySlices) {
  Tensor x = make_tensor(Dims{8, 8}, DType::kFloat32, true);
  Tensor base = ops::neg(x);
  Tensor src = ops::exp(make_tensor(Dims{3}, DType::kFloat32, true));
  ops::assign_index(base, {{true, 0, 5, 0}, {false, 0, 0, 3}}, src);
  EXPECT_EQ(base.grad_fn()->name(), "CopySlices");
  log.allocated.clear();
  log.freed.clear();
  run_backward(base, make_tensor(Dims{8, 8}, DType::kFloat32));
  // new_empty_strided (8, 8), the slice's clone (3), zeros_like (3); exp's grad * result (3);
  // neg's backward (8, 8), stolen into x.grad.
  EXPECT_EQ(log.allocated, (B{256, 12, 12, 12, 256}));
  EXPECT_TRUE(x.grad().defined());
}

// A base that needed no gradient (the rule's zero-filled output) passes none on, and makes no zeros.
TEST_F(GdnOpsTest, IndexedAssignmentIntoATensorNeedingNoGradient) {
  Tensor base = ops::zeros(Dims{2, 4}, DType::kFloat32);
  Tensor src = ops::exp(make_tensor(Dims{4}, DType::kFloat32, true));
  ops::assign_index(base, {{true, 0, 1, 0}}, src);
  ASSERT_NE(base.grad_fn(), nullptr);
  log.allocated.clear();
  run_backward(base, make_tensor(Dims{2, 4}, DType::kFloat32));
  EXPECT_EQ(log.allocated, (B{32, 16, 16}));  // new_empty_strided, the clone; then exp's grad * result
}

// The selective policy saves batched matmuls and the convolution, as HyperParallel's does.
TEST(GdnPolicy, SavesBmmAndConvolution) {
  SelectivePolicy policy;
  EXPECT_TRUE(policy.saves(Op::kBmm, false));
  EXPECT_TRUE(policy.saves(Op::kConvolution, false));
  EXPECT_FALSE(policy.saves(Op::kExp, false));
  EXPECT_FALSE(policy.saves(Op::kSigmoid, false));
}

}  // namespace
}  // namespace census
