// File: size_class_index.h
// SizeClassIndex: a pool's free blocks in PyTorch's BlockComparatorSize order (stream, size, address),
// kept by size class instead of in one std::set.
//
// Note [Free blocks by size class]: the simulation asks the free blocks for a best fit at every
// allocation and changes them at every allocation and free (a split's remainder put back, a merge's
// neighbours taken out), tens of thousands of times a step. A red-black tree makes each of those a
// walk over nodes scattered in memory. Here a block's size picks its class: its bit width and the
// three bits after its leading one, eight classes between two powers of two, so every size of a class
// is below every size of the next. A class holds its blocks in a short sorted array, and a bitmap says
// which classes hold any: a best fit reads the request's class, then the first non-empty one after
// it. About as many instructions as the tree, far fewer of them waiting on memory: on a 70B pipeline's
// first stage, every event simulated, the allocator takes about a quarter less time. The order is the
// set's, key for key: classes in size order, each sorted by the same operator<, streams in turn; so
// every choice the allocator makes, and the order it releases cached segments in, is the one
// PyTorch's std::set gives (tests/alloc/size_class_index_test.cpp checks every answer against one).
//
// A class's array runs from its largest key down to its smallest. A best fit that reads past its own
// class takes the next class's smallest key: the lowest address of the smallest size there, the last
// of its array, taken off without moving the rest. That is the allocator's steady traffic where free
// segments pile up: a MoE pipeline stage caches hundreds of whole 20 MiB segments (each request of
// 1-10 MiB gets one), every such request takes the lowest one and splits it, and its free gives the
// lowest ones back. Kept in ascending order, each of those moved the whole class (memmove was a
// quarter of the allocator's instructions on Qwen3.5-397B's stage 1 at 64 micro-batches); in
// descending order they touch its end.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

namespace census::alloc {

// Key: stream(), size() and an operator< that orders a stream's keys by size, then address.
template <class Key>
class SizeClassIndex {
 public:
  // Where a held key sits: its stream, its class and its index in the class's bucket; `key` null where
  // there is none. Good until the index next changes.
  struct Place {
    const Key* key = nullptr;
    uint32_t stream = 0, size_class = 0, index = 0;
    explicit operator bool() const { return key != nullptr; }
  };

  size_t size() const { return count_; }

  void insert(const Key& key) {
    Stream& s = stream(key.stream());
    const size_t c = size_class(key.size());
    std::vector<Key>& bucket = s.buckets[c];
    const size_t at = above(bucket, key);
    bucket.push_back(key);
    shift_right(bucket.data(), at, bucket.size() - 1);
    bucket[at] = key;
    s.occupied[c / 64] |= uint64_t{1} << (c % 64);
    ++count_;
  }

  // `key`, which must be held.
  void erase(const Key& key) {
    const size_t c = size_class(key.size());
    const std::vector<Key>& bucket = streams_[static_cast<size_t>(key.stream())].buckets[c];
    erase_at(Place{nullptr, static_cast<uint32_t>(key.stream()), static_cast<uint32_t>(c),
                   static_cast<uint32_t>(above(bucket, key))});
  }
  // The key at `place` (find's, no change made since).
  void erase_at(const Place& place) {
    Stream& s = streams_[place.stream];
    std::vector<Key>& bucket = s.buckets[place.size_class];
    shift_left(bucket.data(), place.index, bucket.size() - 1);
    bucket.pop_back();
    if (bucket.empty()) s.occupied[place.size_class / 64] &= ~(uint64_t{1} << (place.size_class % 64));
    --count_;
  }

  // std::set::lower_bound within one stream: its first key not less than `key`, and where it is.
  Place find(const Key& key) const {
    const auto stream = static_cast<uint32_t>(key.stream());
    if (stream >= stream_count_) return {};
    const Stream& s = streams_[stream];
    const size_t c = size_class(key.size());
    const std::vector<Key>& bucket = s.buckets[c];
    const size_t at = not_below(bucket, key);  // the keys not less than `key`: the smallest is the last
    if (at != 0) return Place{&bucket[at - 1], stream, static_cast<uint32_t>(c), static_cast<uint32_t>(at - 1)};
    return first_from(s, stream, c + 1);
  }
  // std::set::lower_bound within one stream: its first key not less than `key`, if any.
  std::optional<Key> lower_bound(const Key& key) const { return value(find(key)); }
  // The key after `key` in its stream, if any (`key` held).
  std::optional<Key> next(const Key& key) const {
    const Stream& s = streams_[static_cast<size_t>(key.stream())];
    const size_t c = size_class(key.size());
    const std::vector<Key>& bucket = s.buckets[c];
    const size_t at = above(bucket, key);
    if (at != 0) return bucket[at - 1];
    return value(first_from(s, static_cast<uint32_t>(key.stream()), c + 1));
  }
  // The key before `key` in its stream, if any (`key` held).
  std::optional<Key> prev(const Key& key) const {
    const Stream& s = streams_[static_cast<size_t>(key.stream())];
    const size_t c = size_class(key.size());
    const std::vector<Key>& bucket = s.buckets[c];
    const size_t at = not_below(bucket, key);
    if (at != bucket.size()) return bucket[at];
    return last_before(s, c);
  }
  // A stream's largest key, if any.
  std::optional<Key> last(int32_t stream) const {
    const Stream* s = find_stream(stream);
    if (s == nullptr) return std::nullopt;
    return last_before(*s, kClasses);
  }

  // Every key in order: streams, then sizes and addresses.
  template <class F>
  void for_each(F&& f) const {
    for (const Stream& s : streams_)
      for (size_t word = 0; word < kWords; ++word)
        for (uint64_t bits = s.occupied[word]; bits != 0; bits &= bits - 1) {
          const std::vector<Key>& bucket = s.buckets[word * 64 + static_cast<size_t>(std::countr_zero(bits))];
          for (size_t i = bucket.size(); i-- > 0;) f(bucket[i]);  // from its smallest key up
        }
  }

 private:
  // Sizes below 16 are their own class; above, the bit width and the three bits after the leading one
  // (Note [Free blocks by size class]).
  static constexpr size_t kClasses = 65 * 8;
  static constexpr size_t kWords = (kClasses + 63) / 64;
  static size_t size_class(int64_t size) {
    const auto u = static_cast<uint64_t>(size);
    if (u < 16) return static_cast<size_t>(u);
    const int width = std::bit_width(u);
    return static_cast<size_t>(width) * 8 + static_cast<size_t>((u >> (width - 4)) & 7);
  }
  // How many of `bucket`'s keys, from its largest down, are above `key`: where `key` goes, or is.
  static size_t above(const std::vector<Key>& bucket, const Key& key) {
    return leading(bucket, [&](const Key& held) { return key < held; });
  }
  // How many of its keys, from its largest down, are not below `key`.
  static size_t not_below(const std::vector<Key>& bucket, const Key& key) {
    return leading(bucket, [&](const Key& held) { return !(held < key); });
  }
  // How many keys from the first hold `holds` (true of a leading run): a binary search written out, as
  // it runs at every allocation and free (std::partition_point is left a call in the -O1 build).
  template <class Holds>
  static size_t leading(const std::vector<Key>& bucket, Holds holds) {
    const Key* keys = bucket.data();
    size_t first = 0, count = bucket.size();
    while (count > 0) {
      const size_t half = count / 2;
      if (holds(keys[first + half])) {
        first += half + 1;
        count -= half + 1;
      } else {
        count = half;
      }
    }
    return first;
  }
  // keys[from, to) moved one place up, keys[from + 1, to + 1) one down: a loop over a few keys costs
  // less than a call to memmove, which copies more keys faster.
  static void shift_right(Key* keys, size_t from, size_t to) {
    if (to - from > kShortShift) {
      std::memmove(static_cast<void*>(keys + from + 1), keys + from, (to - from) * sizeof(Key));
      return;
    }
    for (size_t i = to; i > from; --i) keys[i] = keys[i - 1];
  }
  static void shift_left(Key* keys, size_t from, size_t to) {
    if (to - from > kShortShift) {
      std::memmove(static_cast<void*>(keys + from), keys + from + 1, (to - from) * sizeof(Key));
      return;
    }
    for (size_t i = from; i < to; ++i) keys[i] = keys[i + 1];
  }
  static constexpr size_t kShortShift = 4;
  static std::optional<Key> value(const Place& place) {
    if (!place) return std::nullopt;
    return *place.key;
  }

  struct Stream {
    std::array<uint64_t, kWords> occupied{};
    std::array<std::vector<Key>, kClasses> buckets{};  // held in place: one load fewer to a bucket
  };

  Stream& stream(int32_t stream) {
    if (static_cast<size_t>(stream) >= stream_count_) {
      streams_.resize(static_cast<size_t>(stream) + 1);
      stream_count_ = streams_.size();
    }
    return streams_[static_cast<size_t>(stream)];
  }
  const Stream* find_stream(int32_t stream) const {
    return static_cast<size_t>(stream) < stream_count_ ? &streams_[static_cast<size_t>(stream)] : nullptr;
  }
  // The first key of the first non-empty class from `c` on.
  Place first_from(const Stream& s, uint32_t stream, size_t c) const {
    for (size_t word = c / 64; word < kWords; ++word) {
      uint64_t bits = s.occupied[word];
      if (word == c / 64) bits &= c % 64 == 0 ? ~uint64_t{0} : ~((uint64_t{1} << (c % 64)) - 1);
      if (bits != 0) {
        const size_t found = word * 64 + static_cast<size_t>(std::countr_zero(bits));
        const std::vector<Key>& bucket = s.buckets[found];  // its smallest key: the last
        return Place{&bucket.back(), stream, static_cast<uint32_t>(found), static_cast<uint32_t>(bucket.size() - 1)};
      }
    }
    return {};
  }
  // The last key of the last non-empty class before `c`.
  std::optional<Key> last_before(const Stream& s, size_t c) const {
    if (c == 0) return std::nullopt;
    const size_t top = c - 1;  // the highest class looked at
    for (size_t word = top / 64 + 1; word-- > 0;) {
      uint64_t bits = s.occupied[word];
      if (word == top / 64 && top % 64 != 63) bits &= (uint64_t{1} << (top % 64 + 1)) - 1;
      if (bits != 0) return s.buckets[word * 64 + 63 - static_cast<size_t>(std::countl_zero(bits))].front();
    }
    return std::nullopt;
  }

  std::vector<Stream> streams_;  // by stream, up to the highest used
  size_t stream_count_ = 0;       // streams_.size(), which divides by a Stream's size at every ask
  size_t count_ = 0;
};

}  // namespace census::alloc
