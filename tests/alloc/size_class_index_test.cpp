// The size-class index of free blocks (alloc/size_class_index.h) against the std::set PyTorch keeps
// them in: over random inserts and erases, on several streams, with many equal sizes and sizes on
// both sides of every class boundary, every answer the allocator asks for (lower_bound and find, next, prev, a
// stream's last key, the whole order) is the set's, and a key erased where find found it is gone.
#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <set>
#include <vector>

#include "alloc/size_class_index.h"

namespace census::alloc {
namespace {

// A key ordered as the allocator's SizeKey: stream, size, address.
struct Key {
  int32_t s;
  int64_t bytes;
  int64_t ptr;
  int32_t stream() const { return s; }
  int64_t size() const { return bytes; }
  bool operator<(const Key& o) const {
    if (s != o.s) return s < o.s;
    if (bytes != o.bytes) return bytes < o.bytes;
    return ptr < o.ptr;
  }
  bool operator==(const Key& o) const { return s == o.s && bytes == o.bytes && ptr == o.ptr; }
};

// std::set's answer within a stream, as the allocator reads it.
std::optional<Key> in_stream(const std::set<Key>& set, std::set<Key>::const_iterator it, int32_t stream) {
  if (it == set.end() || it->s != stream) return std::nullopt;
  return *it;
}

TEST(SizeClassIndex, OrdersAsTheSet) {
  std::mt19937_64 rng(27);
  // sizes clustered (a few repeated, as a step's activations are) and spread over 2^0 .. 2^40
  std::vector<int64_t> sizes = {1, 7, 15, 16, 17, 512, 1023, 1024, 1025, 2 << 20, 20 << 20, 128 << 20, 128 << 20};
  for (int shift = 4; shift <= 40; ++shift)
    for (int64_t d : {-1, 0, 1}) sizes.push_back((int64_t{1} << shift) + d * ((int64_t{1} << shift) / 8) + d);
  SizeClassIndex<Key> index;
  std::set<Key> set;
  std::vector<Key> held;
  for (int step = 0; step < 20000; ++step) {
    if (held.empty() || rng() % 5 < 3) {
      const Key k{static_cast<int32_t>(rng() % 3), sizes[rng() % sizes.size()], static_cast<int64_t>(rng() % 4096) << 20};
      if (set.insert(k).second) {
        index.insert(k);
        held.push_back(k);
      }
    } else {
      const size_t i = rng() % held.size();
      if (rng() % 2 == 0) {
        index.erase(held[i]);
      } else {  // erased where find, a held key's lower bound, says it is
        const auto place = index.find(held[i]);
        ASSERT_TRUE(place && *place.key == held[i]);
        index.erase_at(place);
      }
      set.erase(held[i]);
      held[i] = held.back();
      held.pop_back();
    }
    ASSERT_EQ(index.size(), set.size());
    // a search for a size at, below or above a held one, and its neighbours
    const int32_t stream = static_cast<int32_t>(rng() % 4);  // stream 3 is never used
    const int64_t size = sizes[rng() % sizes.size()] + static_cast<int64_t>(rng() % 3) - 1;
    const Key probe{stream, size, 0};
    const auto it = set.lower_bound(probe);
    const std::optional<Key> found = index.lower_bound(probe);
    ASSERT_EQ(found, in_stream(set, it, stream)) << "lower_bound(" << stream << ", " << size << ")";
    const auto place = index.find(probe);
    ASSERT_EQ(place ? std::optional<Key>(*place.key) : std::nullopt, found);
    if (found) {
      ASSERT_EQ(index.next(*found), in_stream(set, std::next(it), stream));
      ASSERT_EQ(index.prev(*found), it == set.begin() ? std::nullopt : in_stream(set, std::prev(it), stream));
    }
    const auto end = set.lower_bound(Key{stream + 1, 0, 0});
    ASSERT_EQ(index.last(stream), end == set.begin() ? std::nullopt : in_stream(set, std::prev(end), stream));
    if (step % 500 == 0) {
      std::vector<Key> order;
      index.for_each([&](const Key& k) { order.push_back(k); });
      ASSERT_EQ(order, std::vector<Key>(set.begin(), set.end()));
    }
  }
}

}  // namespace
}  // namespace census::alloc
