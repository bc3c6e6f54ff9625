// The backward engine: order, accumulation, AccumulateGrad, release of saved tensors.
#include <gtest/gtest.h>

#include "autograd/engine.h"
#include "ops/ops.h"
#include "../recording_observer.h"

namespace census {
namespace {

using testing::RecordingObserver;

// The ready node with the highest sequence number runs first: of two branches fed by one add, the
// one recorded later in the forward runs its backward first.
TEST(Engine, RunsTheLatestReadyNodeFirst) {
  Session session;
  RecordingObserver log;
  session.add_observer(&log);
  Tensor x = make_tensor(Dims{4}, DType::kFloat32, true);
  Tensor a = ops::neg(x);      // earlier
  Tensor b = ops::silu(x);     // later
  Tensor y = ops::add(a, b);
  log.ops.clear();
  run_backward(y, make_tensor(Dims{4}, DType::kFloat32));
  ASSERT_GE(log.ops.size(), 2u);
  EXPECT_EQ(log.ops[0].rfind("aten.silu_backward", 0), 0u);
  EXPECT_EQ(log.ops[1].rfind("aten.neg", 0), 0u);
}

// A second gradient for the same input is added out of place (Note [InputBuffer accumulation under a
// dispatch mode]): one new allocation, both summands freed.
TEST(Engine, AccumulatesOutOfPlace) {
  Session session;
  RecordingObserver log;
  session.add_observer(&log);
  Tensor x = make_tensor(Dims{4}, DType::kFloat32, true);
  Tensor h = ops::neg(x);
  Tensor y = ops::add(ops::neg(h), ops::silu(h));
  log.ops.clear();
  run_backward(y, make_tensor(Dims{4}, DType::kFloat32));
  int adds = 0;
  for (const std::string& op : log.ops) adds += op.rfind("aten.add.Tensor", 0) == 0;
  EXPECT_EQ(adds, 1);
}

// A leaf's first gradient is stolen when nothing else holds it, and saved tensors are released once
// their node has run.
TEST(Engine, StealsTheFirstGradientAndReleasesSavedTensors) {
  Session session;
  RecordingObserver log;
  session.add_observer(&log);
  Tensor w = make_parameter(Dims{8, 4}, "proj.weight");
  Tensor x = make_tensor(Dims{16, 4}, DType::kBFloat16);
  Tensor y;
  {
    Tensor input = ops::mul(x, 1.0);  // a non-leaf the mm saves
    y = ops::mm(input, ops::t(w));
  }
  const size_t frees_before = log.freed.size();
  run_backward(y, make_tensor(Dims{16, 8}, DType::kBFloat16));
  // The weight's gradient is the mm output itself, with the weight's strides.
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().strides(), w.strides());
  // The saved input (16 x 4 bf16) was freed by the release.
  EXPECT_NE(std::find(log.freed.begin() + frees_before, log.freed.end(), 16 * 4 * 2), log.freed.end());
}

}  // namespace
}  // namespace census
