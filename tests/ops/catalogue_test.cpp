// The op catalogue checked as a whole: every entry named as ATen names it and once; every view
// aliases its input and allocates nothing; every compute op allocates its output.
#include <gtest/gtest.h>

#include <set>

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
    // namespace.op.overload
    EXPECT_EQ(std::count(def.name.begin(), def.name.end(), '.'), 2) << def.name;
  }
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
