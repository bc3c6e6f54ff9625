// PEFT's lora.Linear (nn/lora.h) on one q_proj small enough to follow by hand: 128 tokens of width 256 into
// 256, a frozen bf16 base, rank 8, as huggingface/peft 5d602fd's Linear.forward runs it. The whole steps are
// compared with the LoRA oracle's cases (tests/data/step/steady/*_lora_*).
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <set>

#include "autograd/engine.h"
#include "nn/linear.h"
#include "nn/lora.h"
#include "ops/ops.h"

namespace census {
namespace {

// The bytes of each storage an op makes, in order (an op's output on a storage made before, as
// _unsafe_view's, is no new storage), what the forward saves, and what is freed.
class NewStorages final : public Observer {
 public:
  void on_op(const OpCall& call) override {
    for (const Tensor& out : call.outputs)
      if (seen_.insert(out.storage_id()).second && call.def.kind != OpKind::kView) allocated.push_back(out.storage()->nbytes);
  }
  void on_free(const Storage& storage) override { freed.push_back(storage.nbytes); }
  void on_save(const Tensor& tensor, const OpDef*) override { saved.push_back(tensor.describe()); }
  void know(const Tensor& t) { seen_.insert(t.storage_id()); }

  std::vector<int64_t> allocated;
  std::vector<int64_t> freed;
  std::vector<std::string> saved;

 private:
  std::set<int64_t> seen_;
};

constexpr int64_t kT = 128, kIn = 256, kOut = 256, kR = 8;

// One adapted q_proj: the base frozen (built while parameters do not require grad), its adapters trained.
struct AdaptedLinear {
  Session session;
  NewStorages seen;
  nn::LoraConfig config;
  nn::ParameterList params;
  std::optional<nn::LoraScope> scope;
  std::optional<nn::Linear> q_proj;
  Tensor input;
  Tensor output;
  explicit AdaptedLinear(DType adapters, double dropout = 0.0, bool dora = false) {
    config.r = kR;
    config.target_modules = {"q_proj"};
    config.dtype = adapters;
    config.dropout = dropout;
    config.use_dora = dora;
    scope.emplace(&config, /*inputs_require_grad=*/false);
    session.set_parameters_require_grad(false);
    q_proj.emplace("self_attn.q_proj", kIn, kOut, /*bias=*/false, params);
    session.set_parameters_require_grad(true);
    input = make_tensor(Dims{1, kT, kIn}, DType::kBFloat16, true);
    for (const Tensor& p : params) seen.know(p);
    seen.know(input);
    session.add_observer(&seen);
    output = q_proj->forward(input);
  }
  void backward() { run_backward(output, make_tensor(Dims{1, kT, kOut}, DType::kBFloat16)); }
};

TEST(Lora, TheAdaptersTrainAndTheBaseIsFrozen) {
  AdaptedLinear q(DType::kFloat32);
  ASSERT_EQ(q.params.size(), 3u);  // weight, lora_A.default.weight, lora_B.default.weight
  EXPECT_FALSE(q.params[0].requires_grad());
  EXPECT_EQ(q.params[1].sizes(), (Dims{kR, kIn}));
  EXPECT_EQ(q.params[2].sizes(), (Dims{kOut, kR}));
  EXPECT_TRUE(q.params[1].requires_grad() && q.params[2].requires_grad());
  EXPECT_EQ(q.params[1].dtype(), DType::kFloat32);
  EXPECT_EQ(q.params[2].impl()->name, "self_attn.q_proj.lora_B.default.weight");
}

// The forward's seven storages: the base's bf16 output, x's fp32 copy, A x, B A x, its product with the
// scaling, the sum (fp32: bf16 + fp32 promotes), and its bf16 cast, the output. The frozen base saves only
// its weight; lora_A saves the fp32 copy of x (4 T in bytes), lora_B saves A x (4 T r).
TEST(Lora, TheForwardCopiesTheInputToFp32ForTheAdapters) {
  AdaptedLinear q(DType::kFloat32);
  EXPECT_EQ(q.seen.allocated, (std::vector<int64_t>{2 * kT * kOut, 4 * kT * kIn, 4 * kT * kR, 4 * kT * kOut,
                                                    4 * kT * kOut, 4 * kT * kOut, 2 * kT * kOut}));
  EXPECT_EQ(q.seen.saved, (std::vector<std::string>{"bfloat16[256, 256]", "float32[256, 8]", "float32[128, 256]",
                                                     "float32[8, 256]", "float32[128, 8]"}));
  int64_t allocated = 0, freed = 0;
  for (int64_t b : q.seen.allocated) allocated += b;
  for (int64_t b : q.seen.freed) freed += b;
  EXPECT_EQ(allocated - freed, 4 * kT * kIn + 4 * kT * kR + 2 * kT * kOut);  // the two saves and the output
  EXPECT_EQ(q.output.dtype(), DType::kBFloat16);
}

// bf16 adapters: no cast either way; lora_A saves x itself (no new bytes), lora_B A x in bf16.
TEST(Lora, Bf16AdaptersSaveTheInputItself) {
  AdaptedLinear q(DType::kBFloat16);
  EXPECT_EQ(q.seen.allocated,
            (std::vector<int64_t>{2 * kT * kOut, 2 * kT * kR, 2 * kT * kOut, 2 * kT * kOut, 2 * kT * kOut}));
  int64_t allocated = 0, freed = 0;
  for (int64_t b : q.seen.allocated) allocated += b;
  for (int64_t b : q.seen.freed) freed += b;
  EXPECT_EQ(allocated - freed, 2 * kT * kR + 2 * kT * kOut);
}

// Dropout on CUDA: native_dropout's new fp32 output (4 T in) and its bool mask (T in), both kept.
TEST(Lora, DropoutKeepsItsOutputAndABoolMask) {
  AdaptedLinear q(DType::kFloat32, 0.1);
  EXPECT_EQ(q.seen.allocated,
            (std::vector<int64_t>{2 * kT * kOut, 4 * kT * kIn, 4 * kT * kIn, kT * kIn, 4 * kT * kR, 4 * kT * kOut,
                                  4 * kT * kOut, 4 * kT * kOut, 2 * kT * kOut}));
  int64_t allocated = 0, freed = 0;
  for (int64_t b : q.seen.allocated) allocated += b;
  for (int64_t b : q.seen.freed) freed += b;
  // x's copy goes once dropped (lora_A saves the dropout's output); the mask and A x stay.
  EXPECT_EQ(allocated - freed, 4 * kT * kIn + kT * kIn + 4 * kT * kR + 2 * kT * kOut);
}

// The backward: gradients for the adapters alone (dB (out, r), dA (r, in), fp32), and for the input, the
// adapters' fp32 part cast to bf16 and added to the base's.
TEST(Lora, TheBackwardGivesTheAdaptersAndTheInputGradientsAlone) {
  AdaptedLinear q(DType::kFloat32);
  const size_t before = q.seen.allocated.size();
  q.backward();
  EXPECT_FALSE(q.params[0].impl()->grad);
  ASSERT_TRUE(q.params[1].impl()->grad && q.params[2].impl()->grad);
  EXPECT_EQ(q.params[1].grad().dtype(), DType::kFloat32);
  ASSERT_TRUE(q.input.impl()->grad);
  EXPECT_EQ(q.input.grad().dtype(), DType::kBFloat16);
  std::vector<int64_t> backward(q.seen.allocated.begin() + static_cast<std::ptrdiff_t>(before), q.seen.allocated.end());
  std::sort(backward.begin(), backward.end());
  std::vector<int64_t> expected{4 * kT * kOut, 2 * kT * kOut, 4 * kT * kOut, 4 * kOut * kR, 4 * kT * kR, 4 * kR * kIn,
                                4 * kT * kIn, 2 * kT * kIn, 2 * kT * kIn, 2 * kT * kIn};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(backward, expected);
}

// DoRA's forward (lora/dora.py), fp32 adapters: the base's output and x's fp32 copy as LoRA's; then the
// adapters' weight through the modules, eye(in) (in x in), A(eye) (in x r), B(A(eye)) (in x out); the base
// weight's fp32 copy, the adapters' weight times the scaling, their sum and its row norms (out); the
// magnitude over the norms (out); A x and B A x; (m / norm - 1), its product with the base's output, the
// product with B A x, the scaling, their sum (all fp32); the sum with the base's output and its bf16 cast.
// What stays: the output, the base's output and the fp32 m / norm - 1 its product saves, B A x and m / norm
// the other product saves, the norms the division saves, x's copy and A x; the weight-sized temporaries go.
TEST(Lora, DoraMakesTheAdaptersWeightAndTheBaseWeightsFp32CopyEachForward) {
  AdaptedLinear q(DType::kFloat32, 0.0, /*dora=*/true);
  ASSERT_EQ(q.params.size(), 4u);  // and lora_magnitude_vector.default.weight (out)
  EXPECT_EQ(q.params[3].sizes(), (Dims{kOut}));
  const int64_t tout = 4 * kT * kOut;
  EXPECT_EQ(q.seen.allocated,
            (std::vector<int64_t>{2 * kT * kOut, 4 * kT * kIn, 4 * kIn * kIn, 4 * kIn * kR, 4 * kIn * kOut,
                                  4 * kOut * kIn, 4 * kOut * kIn, 4 * kOut * kIn, 4 * kOut, 4 * kOut, 4 * kT * kR,
                                  tout, 4 * kOut, tout, tout, tout, tout, tout, 2 * kT * kOut}));
  int64_t allocated = 0, freed = 0;
  for (int64_t b : q.seen.allocated) allocated += b;
  for (int64_t b : q.seen.freed) freed += b;
  EXPECT_EQ(allocated - freed,
            2 * kT * kOut + 2 * kT * kOut + 4 * kT * kIn + 4 * kT * kR + tout + 3 * 4 * kOut);
}

}  // namespace
}  // namespace census
