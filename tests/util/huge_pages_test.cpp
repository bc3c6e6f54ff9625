// The large buffers' allocator (Note [Huge pages for large buffers], util/huge_pages.h): a vector grown
// through it keeps every element across its growths, and a buffer of 2 MiB or more starts on a huge
// page's boundary (Linux). Their recycling: tests/step/step_recycled_test.cpp.
#include <gtest/gtest.h>

#include <cstdint>

#include "util/recycled.h"

namespace census {
namespace {

// Three million elements (24 MB): the vector grows from small buffers through huge-page ones, each
// growth moving what it held; every element read back is the one written.
TEST(LargeBuffers, AVectorKeepsItsElementsAcrossGrowths) {
  LargeVector<int64_t> v;
  constexpr int64_t kCount = 3'000'000;
  for (int64_t i = 0; i < kCount; ++i) v.push_back(i * 7 + 1);
  ASSERT_EQ(v.size(), static_cast<size_t>(kCount));
  int64_t wrong = 0;
  for (int64_t i = 0; i < kCount; ++i) wrong += v[static_cast<size_t>(i)] != i * 7 + 1 ? 1 : 0;
  EXPECT_EQ(wrong, 0);
#if defined(__linux__)
  EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % kHugePageBytes, 0u);
#endif
  // A buffer below a huge page comes from operator new, and is as usable.
  LargeVector<int64_t> small(1000, 5);
  EXPECT_EQ(small.back(), 5);
}

}  // namespace
}  // namespace census
