// torch.autocast("cuda", dtype=torch.bfloat16) as census runs it (ops/autocast.h): which op casts what, which
// casts are cached and for how long, and where no autocast applies. Each expectation is read off
// autocast_mode.cpp's rules for the op; the whole-step figures are the autocast oracle's
// (tests/data/step/steady/*_autocast_*, compared whole by step_steady_oracle_test.cpp).
#include <gtest/gtest.h>

#include "autograd/engine.h"
#include "ops/autocast.h"
#include "ops/ops.h"
#include "../recording_observer.h"

namespace census {
namespace {

using testing::RecordingObserver;
using V = std::vector<std::string>;
using B = std::vector<int64_t>;

class AutocastTest : public ::testing::Test {
 protected:
  AutocastTest() { session.add_observer(&log); }
  Session session;
  RecordingObserver log;
};

// linear is lower_precision_fp: an fp32 input is cast to bf16 at every use, a trainable fp32 weight once a
// region (cached_cast); the product runs in bf16 and its mm saves both casts.
TEST_F(AutocastTest, ATrainableWeightIsCastOnceARegionAndAnActivationAtEveryUse) {
  const Tensor w = make_parameter(Dims{32, 16}, "proj.weight", DType::kFloat32);
  const Tensor x = make_tensor(Dims{8, 16}, DType::kFloat32);
  const AutocastScope autocast(true);
  const Tensor y1 = ops::linear(x, w);
  const Tensor y2 = ops::linear(x, w);
  EXPECT_EQ(y1.dtype(), DType::kBFloat16);
  // The first linear: x cast (8 x 16 x 2 = 256 B), w cast (32 x 16 x 2 = 1,024 B), the product (8 x 32 x 2);
  // the second: x cast again, the cached w, the product.
  EXPECT_EQ(log.allocated, (B{256, 1024, 512, 256, 512}));
  EXPECT_EQ(log.saved, (V{"bfloat16[8, 16]", "bfloat16[8, 16]"}));  // x's casts: w needs a gradient
}

// A frozen fp32 weight (a LoRA base loaded in fp32) is no cached argument: cast again at every use. The
// input here is a leaf that requires grad (as enable_input_require_grads makes the embedding's output): cached.
TEST_F(AutocastTest, AFrozenWeightIsCastAtEveryUse) {
  Tensor w = make_parameter(Dims{32, 16}, "base.weight", DType::kFloat32);
  w.impl()->requires_grad = false;
  const Tensor x = make_tensor(Dims{8, 16}, DType::kFloat32, /*requires_grad=*/true);
  const AutocastScope autocast(true);
  const Tensor y1 = ops::linear(x, w);
  const Tensor y2 = ops::linear(x, w);
  EXPECT_EQ(log.allocated, (B{256, 1024, 512, 1024, 512}));
  // Each mm keeps its own bf16 copy of the weight, for x's gradient.
  EXPECT_EQ(log.saved, (V{"bfloat16[16, 32]", "bfloat16[16, 32]"}));
}

// The cache holds a weight's cast until the outermost region closes, nested regions included (Transformers'
// rotary embedding opens one with enabled=False); then the cast lives on only where a node saved it.
TEST_F(AutocastTest, TheOutermostRegionsExitEmptiesTheCache) {
  const Tensor w = make_parameter(Dims{32, 16}, "proj.weight", DType::kFloat32);
  const Tensor x = make_tensor(Dims{8, 16}, DType::kFloat32);
  {
    const NoGradGuard no_grad;  // nothing saved: the cache alone holds the weight's cast
    const AutocastScope outer(true);
    {
      const AutocastScope inner(false);
      const Tensor fp32 = ops::linear(x, w);  // no autocast: no cast, an fp32 product
      EXPECT_EQ(fp32.dtype(), DType::kFloat32);
    }
    EXPECT_EQ(log.allocated, (B{8 * 32 * 4}));
    const Tensor y = ops::linear(x, w);
    EXPECT_TRUE(autocast::is_enabled());
    log.freed.clear();
  }
  // The product goes with the block, then the weight's cast (1,024 B) at the region's exit (x's went as the
  // linear returned).
  EXPECT_EQ(log.freed, (B{512, 1024}));
  EXPECT_FALSE(autocast::is_enabled());
}

// An op on the fp32 list casts its bf16 input (a new fp32 tensor, then the op); one on the fp32_set_opt_dtype
// list asks its kernel for an fp32 result where no dtype was given, and keeps a dtype that was; an op on no
// list runs as it is.
TEST_F(AutocastTest, TheFp32ListsWidenTheirResults) {
  const Tensor h = make_tensor(Dims{4, 8}, DType::kBFloat16, /*requires_grad=*/true);
  const AutocastScope autocast(true);
  const Tensor r = ops::rsqrt(h);
  EXPECT_EQ(r.dtype(), DType::kFloat32);
  EXPECT_EQ(log.ops, (V{"aten._to_copy.default float32[4, 8]", "aten.rsqrt.default float32[4, 8]"}));
  log.ops.clear();
  const Tensor s = ops::sum(h, {1}, /*keepdim=*/true);  // sum.dim_IntList: the bf16 read, an fp32 result
  EXPECT_EQ(log.ops, (V{"aten.sum.dim_IntList float32[4, 1]"}));
  const Tensor p = ops::softmax(h, -1, DType::kBFloat16);  // a dtype asked for: kept
  EXPECT_EQ(p.dtype(), DType::kBFloat16);
  EXPECT_EQ(ops::softmax(h, -1, std::nullopt).dtype(), DType::kFloat32);
  EXPECT_EQ(ops::mean(h, -1, true).dtype(), DType::kBFloat16);  // mean: on no list
  EXPECT_EQ(ops::silu(h).dtype(), DType::kBFloat16);
}

// Inside an autocast op its own ops see no autocast: linear casts its arguments once, and the addmm it runs
// does not cast them again (WrapFunction_'s ExcludeDispatchKeyGuard).
TEST_F(AutocastTest, AnAutocastOpsInnerOpsCastNothing) {
  const Tensor w = make_parameter(Dims{32, 16}, "proj.weight", DType::kFloat32);
  const Tensor b = make_parameter(Dims{32}, "proj.bias", DType::kFloat32);
  const Tensor x = make_tensor(Dims{8, 16}, DType::kFloat32);
  const AutocastScope autocast(true);
  const Tensor y = ops::linear(x, w, b);
  EXPECT_EQ(log.ops, (V{"aten._to_copy.default bfloat16[8, 16]", "aten._to_copy.default bfloat16[32, 16]",
                        "aten._to_copy.default bfloat16[32]", "aten.t.default bfloat16[16, 32]",
                        "aten.addmm.default bfloat16[8, 32]"}));
}

// Outside a region nothing is cast: fp32 in, fp32 out.
TEST_F(AutocastTest, NoRegionNoCast) {
  const Tensor w = make_parameter(Dims{32, 16}, "proj.weight", DType::kFloat32);
  const Tensor x = make_tensor(Dims{8, 16}, DType::kFloat32);
  EXPECT_EQ(ops::linear(x, w).dtype(), DType::kFloat32);
  EXPECT_EQ(log.allocated, (B{8 * 32 * 4}));
}

}  // namespace
}  // namespace census
