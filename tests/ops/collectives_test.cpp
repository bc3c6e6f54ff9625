// The collectives as one rank runs them: each allocates its output on the rank, moves no FLOPs, and its
// backward is the collective autograd gives it; DTensor's redistributions built on them; the bytes a
// rank sends over the wire.
#include <gtest/gtest.h>

#include "autograd/engine.h"
#include "ops/ops.h"
#include "../recording_observer.h"

namespace census {
namespace {

using testing::RecordingObserver;

class CollectivesTest : public ::testing::Test {
 protected:
  CollectivesTest() { session.add_observer(&log); }
  Session session;
  RecordingObserver log;
};

TEST(CollectivesCatalogue, OneRowEachNoFlops) {
  for (Op op : {Op::kAllGatherIntoTensor, Op::kReduceScatterTensor, Op::kAllReduce, Op::kAllToAllSingle}) {
    EXPECT_TRUE(op_def(op).is_collective()) << op_def(op).name;
    EXPECT_EQ(op_def(op).flops_rule, FlopsRule::kNone) << op_def(op).name;
  }
  EXPECT_EQ(op_def(Op::kAllGatherIntoTensor).name, "_c10d_functional.all_gather_into_tensor.default");
  EXPECT_TRUE(op_def(Op::kWaitTensor).is_view());  // c10d's wait_tensor returns its input
}

// A (64, 256) bf16 shard over 4 ranks: the all-gather's output is (256, 256), 131,072 B; the
// reduce-scatter of it the rank's (64, 256), 32,768 B; the all-reduce a new (64, 256); the all-to-all
// its received rows.
TEST_F(CollectivesTest, EachAllocatesItsOutputOnTheRank) {
  const Tensor shard = make_tensor(Dims{64, 256}, DType::kBFloat16);
  const Tensor gathered = ops::all_gather_into_tensor(shard, 4);
  EXPECT_EQ(gathered.sizes(), (Dims{256, 256}));
  const Tensor scattered = ops::reduce_scatter_tensor(gathered, 4);
  EXPECT_EQ(scattered.sizes(), (Dims{64, 256}));
  const Tensor reduced = ops::all_reduce(shard, 4);
  const Tensor exchanged = ops::all_to_all_single(shard, 96, 4);
  EXPECT_EQ(exchanged.sizes(), (Dims{96, 256}));
  EXPECT_EQ(ops::wait_tensor(reduced).storage(), reduced.storage());
  EXPECT_EQ(log.allocated, (std::vector<int64_t>{131'072, 32'768, 32'768, 49'152}));
}

// An all-gather's backward reduce-scatters the gradient; a reduce-scatter's all-gathers it.
TEST_F(CollectivesTest, AllGatherBackwardIsAReduceScatter) {
  const Tensor shard = make_tensor(Dims{64, 256}, DType::kBFloat16, /*requires_grad=*/true);
  const Tensor gathered = ops::all_gather_into_tensor(shard, 2);
  log.ops.clear();
  run_backward(gathered, make_tensor(gathered.sizes(), DType::kBFloat16));
  ASSERT_FALSE(log.ops.empty());
  EXPECT_EQ(log.ops.front().rfind("_c10d_functional.reduce_scatter_tensor.default", 0), 0u) << log.ops.front();
}

// DTensor's Shard(1) -> Replicate of a (1, 64, 256) stream over 2 ranks: one all-gather (2, 64, 256),
// read as (1, 128, 256) without a copy; its backward lays the gradient's two chunks on dim 0 (a cat)
// and reduce-scatters them.
TEST_F(CollectivesTest, SequenceShardToReplicateAndBack) {
  const Tensor local = make_tensor(Dims{1, 64, 256}, DType::kBFloat16, /*requires_grad=*/true);
  const Tensor full = ops::shard_to_replicate(local, 1, 2);
  EXPECT_EQ(full.sizes(), (Dims{1, 128, 256}));
  EXPECT_EQ(log.allocated, (std::vector<int64_t>{65'536}));
  log.allocated.clear();
  run_backward(full, make_tensor(full.sizes(), DType::kBFloat16));
  // the cat (2, 64, 256) and the reduce-scatter's (1, 64, 256), then AccumulateGrad keeps it
  EXPECT_EQ(log.allocated, (std::vector<int64_t>{65'536, 32'768}));
}

TEST(CollectivesWire, RingBytesPerRank) {
  EXPECT_EQ(ops::collective_wire_bytes(Op::kAllGatherIntoTensor, 1'000, 4), 750);
  EXPECT_EQ(ops::collective_wire_bytes(Op::kReduceScatterTensor, 1'000, 4), 750);
  EXPECT_EQ(ops::collective_wire_bytes(Op::kAllReduce, 1'000, 4), 1'500);
  EXPECT_EQ(ops::collective_wire_bytes(Op::kAllToAllSingle, 1'000, 4), 750);
  EXPECT_EQ(ops::collective_wire_bytes(Op::kAllReduce, 1'000, 1), 0);
  EXPECT_EQ(ops::collective_wire_bytes(Op::kMm, 1'000, 4), 0);
}

}  // namespace
}  // namespace census
