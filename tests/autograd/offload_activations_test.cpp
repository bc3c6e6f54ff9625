// TRL's activation offloading (autograd/offload_activations.h) on graphs small enough to follow by hand:
// which saves leave the device, what the forward stash keeps, what the backward brings back and when
// it lets go. Every tensor is 4 x 256 bf16 (2,048 B) unless said otherwise.
#include <gtest/gtest.h>

#include "autograd/engine.h"
#include "autograd/offload_activations.h"
#include "census/live_bytes.h"
#include "graph/context.h"
#include "ops/ops.h"
#include "../recording_observer.h"

namespace census {
namespace {

using testing::RecordingObserver;

constexpr int64_t kBytes = 4 * 256 * 2;

Tensor activation() { return ops::mul(make_tensor(Dims{4, 256}, DType::kBFloat16, true), 1.0); }

// Eight saves, each a rule of the pack: x [4, 256] saved by pow (1), again by pow (2) and by mm (3) with
// a parameter's transpose (4); a 512 B tensor (5); rows 2-5 of an [8, 256] at offset 512 (6); that
// [8, 256] transposed (7); a [1, 256] broadcast to [4, 256] (8). The hooks, entered and left around them.
Ref<OffloadActivations> eight_saves(OffloadPolicy policy) {
  Ref<OffloadActivations> offload = arena_shared<OffloadActivations>(policy);
  Tensor x = make_tensor(Dims{4, 256}, DType::kBFloat16, true);
  Tensor w = make_parameter(Dims{256, 256}, "proj.weight");
  Tensor small = make_tensor(Dims{4, 64}, DType::kBFloat16, true);
  Tensor rows = make_tensor(Dims{8, 256}, DType::kBFloat16, true);
  Tensor row = make_tensor(Dims{1, 256}, DType::kBFloat16, true);
  std::vector<Tensor> outs;
  offload->enter();
  outs.push_back(ops::pow(x, 2.0));
  outs.push_back(ops::pow(x, 3.0));
  outs.push_back(ops::mm(x, ops::t(w)));
  outs.push_back(ops::pow(small, 2.0));
  outs.push_back(ops::pow(ops::slice(rows, 0, 2, 6), 2.0));
  outs.push_back(ops::pow(ops::t(rows), 2.0));
  outs.push_back(ops::pow(ops::expand(row, Dims{4, 256}), 2.0));
  offload->exit();
  return offload;
}

// TRL's rules: 1 offloaded (2,048 B on the host); 2 and 3 kept, x's key tracked; 4 kept, a parameter's
// view; 5 kept, under 1 KiB; 6 and 7 copied to a contiguous tensor first (2,048 and 4,096 B); 8, a
// broadcast view, its whole 512 B storage.
TEST(OffloadActivations, PacksAsTrlDoes) {
  Session session;
  const Ref<OffloadActivations> offload = eight_saves(OffloadPolicy::kTrl);
  const OffloadCounts& n = offload->counts();
  EXPECT_EQ(n.packs, 8);
  EXPECT_EQ(n.offloaded, 4);
  EXPECT_EQ(n.deduplicated, 2);
  EXPECT_EQ(n.kept_small, 1);
  EXPECT_EQ(n.kept_parameter, 1);
  EXPECT_EQ(n.copied_before_offload, 2);
  EXPECT_EQ(offload->host().live_bytes, 2'048 + 2'048 + 4'096 + 512);
  EXPECT_EQ(offload->host().peak_bytes, 8'704);
}

// torchtune's rules on the same saves: no storage keys (x goes three times), only a parameter itself is
// kept (w.t() goes: 131,072 B), and no copy first: each host tensor is empty_like's, the view's elements
// (the offset rows 2,048 B, the transposed ones 4,096 B; the broadcast view, not dense, its 2,048 B).
TEST(OffloadActivations, PacksAsTorchtuneDoes) {
  Session session;
  const Ref<OffloadActivations> offload = eight_saves(OffloadPolicy::kTorchtune);
  const OffloadCounts& n = offload->counts();
  EXPECT_EQ(n.packs, 8);
  EXPECT_EQ(n.offloaded, 7);
  EXPECT_EQ(n.deduplicated, 0);
  EXPECT_EQ(n.kept_small, 1);
  EXPECT_EQ(n.kept_parameter, 0);
  EXPECT_EQ(n.copied_before_offload, 0);
  EXPECT_EQ(offload->host().live_bytes, 3 * 2'048 + 131'072 + 2'048 + 4'096 + 2'048);
}

// Each offloading pack first lets go of the stashed activations 5 or more tensor ids older: with one
// save a tensor, the 6th lets the 1st go, the 7th the 2nd. Nothing else holds them, so their device
// bytes go there and then; the last 5 stay until the backward's first node has run.
TEST(OffloadActivations, TheForwardStashKeepsTheFiveNewest) {
  Session session;
  LiveBytes live;
  session.add_observer(&live);
  Ref<OffloadActivations> offload = arena_shared<OffloadActivations>();
  std::vector<int64_t> ids;
  Tensor out;
  offload->enter();
  for (int i = 0; i < 7; ++i) {
    Tensor a = activation();
    ids.push_back(a.storage_id());
    out = ops::pow(a, 2.0);  // saves a: tensor id i + 1
  }
  EXPECT_FALSE(live.is_live(ids[0]));
  EXPECT_FALSE(live.is_live(ids[1]));
  for (int i = 2; i < 7; ++i) EXPECT_TRUE(live.is_live(ids[static_cast<size_t>(i)])) << i;
  EXPECT_EQ(offload->host().live_bytes, 7 * kBytes);
  offload->exit();  // __exit__ lets the stash go
  for (int i = 2; i < 7; ++i) EXPECT_FALSE(live.is_live(ids[static_cast<size_t>(i)])) << i;
  session.remove_observer(&live);
}

// A chain a1 = a0^2, ..., a7 = a6^2 saves a0 ... a6 (tensor ids 1-7). Its backward runs PowBackward0 from
// the last: the first finds a6 in the forward stash (no copy) and its post-hook lets the stash go; each
// later node copies its save back (_to_copy, 2,048 B), which lives until the next node has run; the
// final callback lets the last go. 6 copies back, the host empty after.
TEST(OffloadActivations, TheBackwardBringsEachSaveBackForOneNode) {
  Session session;
  RecordingObserver log;
  session.add_observer(&log);
  Ref<OffloadActivations> offload = arena_shared<OffloadActivations>();
  offload->enter();
  Tensor a = activation();
  for (int i = 0; i < 7; ++i) a = ops::pow(a, 2.0);
  log.ops.clear();
  log.allocated.clear();
  run_backward(a, make_tensor(Dims{4, 256}, DType::kBFloat16));
  offload->exit();
  int copies = 0;
  for (const std::string& op : log.ops) copies += op.rfind("aten._to_copy", 0) == 0;
  EXPECT_EQ(copies, 6);
  EXPECT_EQ(offload->counts().brought_back, 6);
  EXPECT_EQ(offload->host().brought_back_bytes, 6 * kBytes);
  EXPECT_EQ(offload->host().live_bytes, 0);
  EXPECT_EQ(offload->host().peak_bytes, 7 * kBytes);
  session.remove_observer(&log);
}

// The caching host allocator's blocks: each host tensor's bytes rounded up to a power of two, a freed block
// kept for the next request of its size. Three saves of [3, 256], [5, 256] and [3, 256] bf16 (1,536, 2,560
// and 1,536 B) take blocks of 2,048, 4,096 and 2,048 B. TRL's next __enter__ forgets them (their variables
// went unpacked); a [7, 256] (3,584 B) and a [3, 256] then reuse a 4,096 and a 2,048 block: no new one.
TEST(OffloadActivations, ThePinnedBlocksArePowersOfTwoKeptForReuse) {
  Session session;
  Ref<OffloadActivations> offload = arena_shared<OffloadActivations>();
  const auto rows = [](int64_t n) { return make_tensor(Dims{n, 256}, DType::kBFloat16, true); };
  std::vector<Tensor> saved{rows(3), rows(5), rows(3), rows(7)}, outs;
  offload->enter();
  for (int i = 0; i < 3; ++i) outs.push_back(ops::pow(saved[static_cast<size_t>(i)], 2.0));
  offload->exit();
  EXPECT_EQ(offload->host().live_bytes, 1'536 + 2'560 + 1'536);
  EXPECT_EQ(offload->host().pinned_reserved_bytes, 2'048 + 4'096 + 2'048);
  outs.clear();
  offload->enter();
  EXPECT_EQ(offload->host().live_bytes, 0);
  outs.push_back(ops::pow(saved[3], 2.0));
  outs.push_back(ops::pow(saved[0], 3.0));
  offload->exit();
  EXPECT_EQ(offload->host().live_bytes, 3'584 + 1'536);
  EXPECT_EQ(offload->host().peak_bytes, 5'632);
  EXPECT_EQ(offload->host().pinned_reserved_bytes, 8'192);
}

// Around the LM head (NoOpManager) the saves are kept as they are; outside an entered offloading it
// does nothing.
TEST(OffloadActivations, TheHeadsSavesAreKept) {
  Session session;
  Ref<OffloadActivations> offload = arena_shared<OffloadActivations>();
  Tensor x = make_tensor(Dims{4, 256}, DType::kBFloat16, true);
  Tensor y, z;
  offload->enter();
  {
    const NoOpManager head;
    y = ops::pow(x, 2.0);
  }
  z = ops::pow(x, 3.0);
  offload->exit();
  EXPECT_EQ(offload->counts().packs, 1);
  EXPECT_EQ(offload->counts().offloaded, 1);
  const NoOpManager outside;  // nothing entered: no hooks changed
  EXPECT_EQ(&GraphContext::current().hooks(), static_cast<SavedTensorHooks*>(&session));
}

}  // namespace
}  // namespace census
