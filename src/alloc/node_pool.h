// File: node_pool.h
// NodePool: the memory of the allocator's block sets' nodes, all of one size, kept on a free list
// and carved from large chunks: an insert or erase costs a pointer swap, not a malloc or free (the sets
// change at every simulated allocation and free). Not thread-safe: one simulated allocator's own.
// NodeSet is a std::set whose nodes come from a pool, through a standard allocator rather than
// std::pmr, which the browser page's C++ library (emscripten's) does not have.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <new>
#include <set>
#include <vector>

namespace census::alloc {

class NodePool {
 public:
  void* allocate(size_t bytes, size_t alignment) {
    if (node_ == 0) node_ = bytes;
    if (bytes != node_ || alignment > alignof(std::max_align_t)) return ::operator new(bytes);
    if (free_ != nullptr) {
      Free* f = free_;
      free_ = f->next;
      return f;
    }
    if (used_ + node_ > kChunk || chunks_.empty()) {
      chunks_.push_back(std::make_unique<std::max_align_t[]>(kChunk / sizeof(std::max_align_t)));
      used_ = 0;
    }
    void* p = reinterpret_cast<char*>(chunks_.back().get()) + used_;
    used_ += (node_ + alignof(std::max_align_t) - 1) / alignof(std::max_align_t) * alignof(std::max_align_t);
    return p;
  }
  void deallocate(void* p, size_t bytes, size_t alignment) {
    if (bytes != node_ || alignment > alignof(std::max_align_t)) return ::operator delete(p);
    free_ = new (p) Free{free_};
  }

 private:
  struct Free {
    Free* next;
  };
  static constexpr size_t kChunk = 64 * 1024;
  size_t node_ = 0;  // the one size this pool keeps: the first asked for
  Free* free_ = nullptr;
  size_t used_ = 0;
  std::vector<std::unique_ptr<std::max_align_t[]>> chunks_;
};

// A standard allocator over a NodePool: a set asks it for one node at a time.
template <class T>
struct NodeAllocator {
  using value_type = T;
  NodePool* pool;
  explicit NodeAllocator(NodePool* p) : pool(p) {}
  template <class U>
  NodeAllocator(const NodeAllocator<U>& other) : pool(other.pool) {}  // NOLINT: rebinding, as std::set does
  T* allocate(size_t n) { return static_cast<T*>(pool->allocate(n * sizeof(T), alignof(T))); }
  void deallocate(T* p, size_t n) { pool->deallocate(p, n * sizeof(T), alignof(T)); }
  template <class U>
  bool operator==(const NodeAllocator<U>& other) const { return pool == other.pool; }
};

template <class Key>
using NodeSet = std::set<Key, std::less<Key>, NodeAllocator<Key>>;

}  // namespace census::alloc
