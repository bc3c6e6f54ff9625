// The arena reuses a destroyed object's memory for the census's next object of its size class, and
// only within the census that made it (Note [Arena memory reused], tensor/arena.h).
#include <gtest/gtest.h>

#include <set>

#include "ops/dispatch.h"
#include "ops/ops.h"

namespace census {
namespace {

Tensor small_tensor() { return make_tensor(Dims{4, 8}, DType::kBFloat16); }

// A tensor made and dropped in turn, a hundred thousand times, lives at the same two addresses (its
// TensorImpl's and its Storage's): the census does not grow with the objects it has ever made.
TEST(ArenaReuse, ObjectsMadeAndDroppedInTurnTakeTheSameMemory) {
  Session session;
  std::set<const void*> impls, storages;
  for (int i = 0; i < 100000; ++i) {
    Tensor t = small_tensor();
    impls.insert(t.impl());
    storages.insert(t.storage().get());
  }
  EXPECT_EQ(impls.size(), 1u);
  EXPECT_EQ(storages.size(), 1u);
}

// A graph built and dropped (nodes of several classes and sizes, views, saved tensors) is rebuilt in
// the memory the builds before it gave back: its loss sits at as many addresses over a thousand builds
// as over ten (an arena that only bumped would give a thousand).
TEST(ArenaReuse, GraphsBuiltAndDroppedCycleThroughTheSameMemory) {
  Session session;
  auto build = [] {
    Tensor x = make_tensor(Dims{16, 32}, DType::kBFloat16, /*requires_grad=*/true);
    Tensor w = make_tensor(Dims{64, 32}, DType::kBFloat16, /*requires_grad=*/true);
    Tensor y = ops::silu(ops::linear(x, w));
    return ops::sum(ops::mul(y, ops::transpose(ops::reshape(y, Dims{64, 16}), 0, 1)), {0, 1}, false);
  };
  std::set<const void*> losses;
  for (int i = 0; i < 10; ++i) losses.insert(build().impl());
  const size_t after_ten = losses.size();
  for (int i = 10; i < 1000; ++i) losses.insert(build().impl());
  EXPECT_EQ(losses.size(), after_ten);
  EXPECT_LT(after_ten, 10u);
}

// An outer census's object released while an inner census runs leaves its memory unused: the inner
// census's objects never sit in the outer census's memory, and the outer census reuses it no more.
TEST(ArenaReuse, MemoryIsReusedOnlyByTheCensusThatMadeIt) {
  Session outer;
  Tensor kept = small_tensor();
  const void* outer_impl = kept.impl();
  {
    Session inner;
    kept = Tensor();  // released while the inner census is current
    Tensor made_inside = small_tensor();
    EXPECT_NE(made_inside.impl(), outer_impl);
  }
  // Back in the outer census, whose free list never received the object: it bumps on.
  Tensor after = small_tensor();
  EXPECT_NE(after.impl(), outer_impl);
  // And memory the outer census itself gave back is reused by it.
  const void* after_impl = after.impl();
  after = Tensor();
  EXPECT_EQ(small_tensor().impl(), after_impl);
}

}  // namespace
}  // namespace census
