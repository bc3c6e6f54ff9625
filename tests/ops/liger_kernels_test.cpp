// Liger's RMSNorm, SwiGLU and rotary functions (ops/liger_kernels.cpp) on tensors small enough to follow by
// hand: what each allocates, saves and lets go of, forward and backward, as their Python around the Triton
// kernels does (Liger-Kernel ead96b6 ops/rms_norm.py, swiglu.py, rope.py). Every activation is bf16.
#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>

#include "autograd/engine.h"
#include "nn/liger_kernels.h"
#include "ops/ops.h"
#include "../recording_observer.h"

namespace census {
namespace {

using testing::RecordingObserver;

int64_t sum_of(const std::vector<int64_t>& bytes, size_t from = 0) {
  int64_t total = 0;
  for (size_t i = from; i < bytes.size(); ++i) total += bytes[i];
  return total;
}

// Rows R = 2 x 8 of width H = 64: the norm's input x, its weight, its output y and the incoming gradient.
struct Normed {
  Tensor x = make_tensor(Dims{2, 8, 64}, DType::kBFloat16, true);
  Tensor weight = make_parameter(Dims{64}, "norm.weight");
  Tensor y;
  Tensor grad = make_tensor(Dims{2, 8, 64}, DType::kBFloat16);
  explicit Normed(bool in_place) : y(ops::liger_rms_norm(x, weight, nn::kLigerSmCount, in_place)) {}
};

// The forward makes Y (R, H) bf16, 2,048 B, and RSTD (R) fp32, 64 B, and saves the input itself, the weight
// and RSTD. The backward writes dX over the incoming gradient (no dX is made), and makes the (SMs, H) fp32
// partial weight gradients, 132 x 64 x 4 = 33,792 B, their sum over the SMs (H) fp32, 256 B, and its bf16
// copy, 128 B, the weight's gradient; the first two go before it returns.
TEST(LigerKernels, RmsNormWritesDxOverTheIncomingGradient) {
  Session session;
  RecordingObserver seen;
  session.add_observer(&seen);
  const Normed n(/*in_place=*/true);
  EXPECT_EQ(seen.allocated, (std::vector<int64_t>{2 * 8 * 64 * 2, 2 * 8 * 4}));
  EXPECT_EQ(seen.saved, (std::vector<std::string>{"bfloat16[16, 64]", "bfloat16[64]", "float32[16]"}));
  EXPECT_EQ(n.y.sizes(), n.x.sizes());

  const size_t allocated = seen.allocated.size(), freed = seen.freed.size();
  run_backward(n.y, n.grad);
  EXPECT_EQ(std::vector<int64_t>(seen.allocated.begin() + allocated, seen.allocated.end()),
            (std::vector<int64_t>{132 * 64 * 4, 64 * 4, 64 * 2}));
  EXPECT_EQ(sum_of(seen.freed, freed) - 2 * 8 * 4, 132 * 64 * 4 + 64 * 4);  // and RSTD, released with the node
  ASSERT_TRUE(n.x.grad().defined());
  EXPECT_EQ(n.x.grad().storage(), n.grad.storage());
  EXPECT_EQ(n.weight.grad().dtype(), DType::kBFloat16);
}

// Gemma 2's and 3's patch (in_place=False): the backward makes dX = zeros_like(dY), 2,048 B, after the partial
// weight gradients, and the incoming gradient is left as it was.
TEST(LigerKernels, RmsNormNotInPlaceMakesDx) {
  Session session;
  RecordingObserver seen;
  session.add_observer(&seen);
  const Normed n(/*in_place=*/false);
  const size_t allocated = seen.allocated.size();
  run_backward(n.y, n.grad);
  EXPECT_EQ(std::vector<int64_t>(seen.allocated.begin() + allocated, seen.allocated.end()),
            (std::vector<int64_t>{132 * 64 * 4, 2 * 8 * 64 * 2, 64 * 4, 64 * 2}));
  ASSERT_TRUE(n.x.grad().defined());
  EXPECT_NE(n.x.grad().storage(), n.grad.storage());
}

// The gate and up projections a and b, (R, I) with R = 16 and I = 128: the forward makes c = empty_like(a),
// 4,096 B, and saves a and b (the eager MLP saves silu(a) and a * b besides); the backward makes nothing: da
// and db are written into a's and b's storages and handed back as views of them.
TEST(LigerKernels, SwigluHandsBackTheGradientsInTheSavedActivations) {
  Session session;
  RecordingObserver seen;
  session.add_observer(&seen);
  const Tensor a = ops::mul(make_tensor(Dims{1, 16, 128}, DType::kBFloat16, true), 1.0);
  const Tensor b = ops::mul(make_tensor(Dims{1, 16, 128}, DType::kBFloat16, true), 1.0);
  seen.allocated.clear();
  seen.saved.clear();
  const Tensor c = ops::liger_silu_mul(a, b);
  EXPECT_EQ(seen.allocated, (std::vector<int64_t>{16 * 128 * 2}));
  EXPECT_EQ(seen.saved, (std::vector<std::string>{"bfloat16[16, 128]", "bfloat16[16, 128]"}));

  const size_t allocated = seen.allocated.size();
  seen.ops.clear();
  run_backward(c, make_tensor(Dims{1, 16, 128}, DType::kBFloat16));
  // The function's backward is two views of the gradient and the kernel; then the two muls by 1.0 hand their
  // gradients on, each a new tensor, the only allocations.
  ASSERT_GE(seen.ops.size(), 3u);
  EXPECT_EQ(seen.ops[0].rfind("aten.view.default", 0), 0u);
  EXPECT_EQ(seen.ops[1].rfind("liger._swiglu_backward_kernel", 0), 0u);
  EXPECT_EQ(seen.allocated.size() - allocated, 2u);
}

// q (1, 4, 8, 16) and k (1, 2, 8, 16), views (transpose(1, 2)) of projections laid out (B, S, N, D), as
// Transformers' attention makes them: the forward rotates both in place, allocates nothing, returns views of
// their storages and saves cos and sin.
struct Rotated {
  Tensor q_proj, k_proj;  // (B, S, N, D), as the projections' views make them
  Tensor q, k;            // LigerRopeFunction's outputs, (B, N, S, D)
};

Rotated rotate(RecordingObserver& seen) {
  Rotated r;
  r.q_proj = ops::mul(make_tensor(Dims{1, 8, 4, 16}, DType::kBFloat16, true), 1.0);
  r.k_proj = ops::mul(make_tensor(Dims{1, 8, 2, 16}, DType::kBFloat16, true), 1.0);
  const Tensor cos = make_tensor(Dims{1, 8, 16}, DType::kBFloat16);
  const Tensor sin = make_tensor(Dims{1, 8, 16}, DType::kBFloat16);
  seen.allocated.clear();
  std::tie(r.q, r.k) = ops::liger_rope(ops::transpose(r.q_proj, 1, 2), ops::transpose(r.k_proj, 1, 2), cos, sin);
  return r;
}

TEST(LigerKernels, RopeRotatesQAndKInPlace) {
  Session session;
  RecordingObserver seen;
  session.add_observer(&seen);
  const Rotated r = rotate(seen);
  EXPECT_TRUE(seen.allocated.empty());
  EXPECT_EQ(seen.saved, (std::vector<std::string>{"bfloat16[1, 8, 16]", "bfloat16[1, 8, 16]"}));
  EXPECT_EQ(r.q.storage(), r.q_proj.storage());
  EXPECT_EQ(r.k.storage(), r.k_proj.storage());
  EXPECT_EQ(r.q.sizes(), (Dims{1, 4, 8, 16}));
}

// The backward copies a gradient to (B, S, N, D) where it is not laid out so: here q's, contiguous (B, N, S, D)
// (a clone's backward hands it on as it came), 1 x 4 x 8 x 16 x 2 = 1,024 B. k's output feeds nothing, so its
// gradient is materialized as an autograd.Function's node does, zeros of the output's shape, 512 B, and copied
// too, 512 B. The kernel then rotates both in place.
TEST(LigerKernels, RopeCopiesAGradientOfAnotherLayoutAndMaterializesAMissingOne) {
  Session session;
  RecordingObserver seen;
  session.add_observer(&seen);
  const Rotated r = rotate(seen);
  const Tensor out = ops::clone(r.q);  // contiguous (B, N, S, D)
  seen.ops.clear();
  seen.allocated.clear();
  run_backward(out, make_tensor(Dims{1, 4, 8, 16}, DType::kBFloat16));
  std::vector<std::string> before_kernel;
  for (const std::string& op : seen.ops) {
    if (op.rfind("liger._triton_rope.backward_pass", 0) == 0) break;
    if (op.rfind("aten.transpose.int", 0) != 0) before_kernel.push_back(op.substr(0, op.find(' ')));
  }
  EXPECT_EQ(before_kernel, (std::vector<std::string>{"aten.zeros.default", "aten.clone.default", "aten.clone.default"}));
  EXPECT_EQ(std::vector<int64_t>(seen.allocated.begin(), seen.allocated.begin() + 3),
            (std::vector<int64_t>{512, 1'024, 512}));
}

}  // namespace
}  // namespace census
