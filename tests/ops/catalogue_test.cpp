// The op catalogue checked as a whole: every entry named as ATen names it and once, in enum order; each
// row's facts agree with its kind; every view aliases its input and allocates nothing; every compute op
// allocates its output.
#include <gtest/gtest.h>

#include <array>
#include <set>
#include <string>

#include "ops/ops.h"
#include "../recording_observer.h"

namespace census {
namespace {

TEST(Catalogue, EveryOpNamedOnceAsATenNamesIt) {
  std::set<std::string_view> names;
  for (size_t i = 0; i < static_cast<size_t>(Op::kCount); ++i) {
    const OpDef& def = op_def(static_cast<Op>(i));
    EXPECT_EQ(static_cast<size_t>(def.op), i);
    EXPECT_TRUE(names.insert(def.name).second) << def.name;
    // namespace.op.overload, lower case as ATen spells its ops
    EXPECT_EQ(std::count(def.name.begin(), def.name.end(), '.'), 2) << def.name;
    const std::string_view op_name = def.name.substr(def.name.find('.') + 1);
    for (char c : op_name.substr(0, op_name.find('.')))
      EXPECT_TRUE((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_') << def.name;
  }
}

// A row's facts agree with its kind: a view has no kernel, so no FLOPs, no policy class but recompute
// and no say over what is saved after it; only matmuls and attention kernels count FLOPs (a matmul by
// a matmul rule, an attention kernel by its scores) and only they and the convolution are saved by
// the policy; only a matmul alternates; the attention kernels bucket their own saves.
TEST(Catalogue, EveryRowsFactsAgreeWithItsKind) {
  size_t index = 0;
  for (const OpDef& def : op_catalogue()) {
    SCOPED_TRACE(std::string(def.name));
    EXPECT_EQ(static_cast<size_t>(def.op), index++);
    EXPECT_EQ(&def, &op_def(def.op));
    const bool matmul_rule = def.flops_rule == FlopsRule::kMatmul || def.flops_rule == FlopsRule::kBiasedMatmul ||
                             def.flops_rule == FlopsRule::kGemm4bit;
    switch (def.kind) {
      case OpKind::kView:
        EXPECT_EQ(def.flops_rule, FlopsRule::kNone);
        EXPECT_EQ(def.sac, SacClass::kRecompute);
        EXPECT_EQ(def.saved_bucket, SavedBucketRule::kByModule);
        break;
      case OpKind::kMatmul:
        EXPECT_TRUE(matmul_rule);
        EXPECT_NE(def.sac, SacClass::kRecompute);
        break;
      case OpKind::kAttentionKernel:
        EXPECT_EQ(def.flops_rule, FlopsRule::kScores);
        EXPECT_EQ(def.sac, SacClass::kAlwaysSave);
        EXPECT_EQ(def.saved_bucket, SavedBucketRule::kAttentionKernel);
        break;
      default:
        EXPECT_EQ(def.flops_rule, FlopsRule::kNone);
        EXPECT_NE(def.sac, SacClass::kAlternate);
        EXPECT_NE(def.saved_bucket, SavedBucketRule::kAttentionKernel);
        if (def.sac == SacClass::kAlwaysSave) {
          EXPECT_EQ(def.op, Op::kConvolution);
        }
    }
    if (def.sac == SacClass::kAlternate) {
      EXPECT_TRUE(def.op == Op::kMm || def.op == Op::kGroupedMm);
    }
    if (def.flops_rule == FlopsRule::kBiasedMatmul) {
      EXPECT_EQ(def.op, Op::kAddmm);
    }
  }
  EXPECT_EQ(index, static_cast<size_t>(Op::kCount));
}

// The FLOPs rules on one call each: 2 * numel(first) * last dim of second; addmm's first matmul
// input is its 2nd argument; the scores' at every pair of tokens, QK^T (D) and AV (Dv).
TEST(Catalogue, FlopsRules) {
  Session session;
  const Tensor a = make_tensor(Dims{6, 4}, DType::kBFloat16);
  const Tensor b = make_tensor(Dims{4, 5}, DType::kBFloat16);
  const Tensor bias = make_tensor(Dims{5}, DType::kBFloat16);
  const std::array<Tensor, 2> mm_inputs{a, b};
  const std::array<Tensor, 3> addmm_inputs{bias, a, b};
  EXPECT_EQ(op_def(Op::kMm).flops(mm_inputs), 2 * 6 * 4 * 5);
  EXPECT_EQ(op_def(Op::kAddmm).flops(addmm_inputs), 2 * 6 * 4 * 5);
  EXPECT_EQ(op_def(Op::kMulTensor).flops(mm_inputs), 0);
  // q (B=1, Nh=2, S=3, D=8), k (1, 1, 3, 8), v (1, 1, 3, Dv=4)
  const std::array<Tensor, 3> qkv{make_tensor(Dims{1, 2, 3, 8}, DType::kBFloat16),
                                  make_tensor(Dims{1, 1, 3, 8}, DType::kBFloat16),
                                  make_tensor(Dims{1, 1, 3, 4}, DType::kBFloat16)};
  EXPECT_EQ(op_def(Op::kFlashAttention).flops(qkv), 2 * 1 * 2 * 3 * 3 * (8 + 4));
}

TEST(Catalogue, ViewsAliasAndComputeOpsAllocate) {
  Session session;
  testing::RecordingObserver log;
  session.add_observer(&log);
  Tensor x = make_tensor(Dims{2, 4, 8}, DType::kBFloat16, /*requires_grad=*/true);
  Tensor m = make_tensor(Dims{4, 8}, DType::kBFloat16);
  const std::vector<Tensor> views = {ops::view(x, Dims{8, 8}), ops::transpose(x, 0, 1), ops::unsqueeze(x, 0),
                                     ops::squeeze(ops::unsqueeze(x, 0), 0), ops::slice(x, -1, 0, 4),
                                     ops::expand(ops::unsqueeze(x, 0), Dims{3, 2, 4, 8})};
  for (const Tensor& v : views) EXPECT_EQ(v.storage(), x.storage());
  EXPECT_EQ(ops::t(m).storage(), m.storage());
  EXPECT_TRUE(log.allocated.empty());
  const std::vector<Tensor> computed = {ops::to(x, DType::kFloat32), ops::pow(x, 2), ops::rsqrt(x), ops::mul(x, x),
                                        ops::add(x, x), ops::neg(x), ops::silu(x), ops::relu(x), ops::clone(x),
                                        ops::mean(x, -1, true), ops::cat({x, x}, 0), ops::mm(m, ops::t(m))};
  for (const Tensor& c : computed) EXPECT_NE(c.storage(), x.storage());
  EXPECT_EQ(log.allocated.size(), computed.size());
}

}  // namespace
}  // namespace census
