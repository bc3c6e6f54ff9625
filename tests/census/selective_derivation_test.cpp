// The selective census derived by hand on the smallest regions: a lone bias-free projection, and two
// projections with a ReLU between them under HyperParallel's policy.
//
// Legend: S tokens, H input width, M hidden width, O output width; bf16 is 2 bytes.
#include <gtest/gtest.h>

#include "autograd/checkpoint.h"
#include "census/measurement.h"
#include "census/selective_census.h"
#include "nn/linear.h"
#include "ops/ops.h"

namespace census {
namespace {

constexpr int64_t S = 64, H = 16, M = 256, O = 16;

// y = x W^T, no bias, x (1, S, H) needing grad.
//   saved: mm saves x (its view) for W's gradient: 2SH. W^T is a parameter's: not counted.
//   working: the backward's grad (2SO) and x (2SH) are live; MmBackward0 allocates W's gradient
//   (2OH, a parameter's: it finds the moment, is not counted), then x's (2SH). Peak: 4SH + 2SO.
TEST(LoneProjection, SavedAndWorking) {
  Measurement measurement;
  nn::ParameterList parameters;
  nn::Linear proj("proj", H, O, /*bias=*/false, parameters);
  Tensor x = make_tensor(Dims{1, S, H}, DType::kBFloat16, /*requires_grad=*/true);
  measurement.track(x);
  const Measured m = measurement.run([&] { return proj.forward(x); }, parameters, make_tensor(Dims{1, S, O}, DType::kBFloat16));
  EXPECT_EQ(m.saved_bytes, 2 * S * H);
  EXPECT_EQ(m.working_bytes, 4 * S * H + 2 * S * O);
}

// y = W2 relu(W1 x) as one checkpointed region: the 1st mm is saved, the 2nd recomputed; relu is
// recomputed.
//   kept: the input x (2SH) and the cached output of the first mm, h (2SM).
//   working: the first unpack (mm2's backward) re-runs the region: mm1's output comes from the cache,
//   relu runs again (r, 2SM), and the recompute stops after mm2's saves; h, saved by no node, dies.
//   mm2's backward makes W2's gradient (apart) and r's (2SM); relu's backward then holds r, its
//   incoming gradient and the one it makes: 2SH + 2SO + 6SM, the peak for these sizes.
//   shares: mm2's FLOPs of both matmuls' run again: 2SMO / (2SHM + 2SMO) = O / (H + O).
TEST(TwoProjectionsWithRelu, SelectiveKeptWorkingAndShare) {
  Measurement measurement;
  nn::ParameterList parameters;
  nn::Linear up("mlp.up", H, M, /*bias=*/false, parameters);
  nn::Linear down("mlp.down", M, O, /*bias=*/false, parameters);
  RecomputeLedger ledger({});  // no attention parameters: both projections are the rest of the layer
  Tensor x = make_tensor(Dims{1, S, H}, DType::kBFloat16, /*requires_grad=*/true);
  measurement.track(x);
  measurement.add_observer(&ledger);
  const Measured m = measurement.run(
      [&] {
        Tensor out = checkpoint([&](const Tensor& input) { return down.forward(ops::relu(up.forward(input))); }, x);
        measurement.remove_observer(&ledger);
        return out;
      },
      parameters, make_tensor(Dims{1, S, O}, DType::kBFloat16));
  EXPECT_EQ(m.kept_bytes, 2 * S * H + 2 * S * M);
  EXPECT_EQ(m.working_bytes, 2 * S * H + 2 * S * O + 6 * S * M);
  EXPECT_EQ(ledger.rest_flops[0], 2 * S * H * M);  // saved
  EXPECT_EQ(ledger.rest_flops[1], 2 * S * M * O);  // recomputed
  EXPECT_EQ(ledger.attention_flops[0] + ledger.attention_flops[1], 0);
}

// Without checkpointing the same region saves x for mm1, relu's result for relu and mm2 (one storage).
TEST(TwoProjectionsWithRelu, PlainSaves) {
  Measurement measurement;
  nn::ParameterList parameters;
  nn::Linear up("mlp.up", H, M, /*bias=*/false, parameters);
  nn::Linear down("mlp.down", M, O, /*bias=*/false, parameters);
  Tensor x = make_tensor(Dims{1, S, H}, DType::kBFloat16, /*requires_grad=*/true);
  measurement.track(x);
  const Measured m = measurement.run([&] { return down.forward(ops::relu(up.forward(x))); }, parameters,
                                     make_tensor(Dims{1, S, O}, DType::kBFloat16));
  EXPECT_EQ(m.saved_bytes, 2 * S * H + 2 * S * M);
}

}  // namespace
}  // namespace census
