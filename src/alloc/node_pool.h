// File: node_pool.h
// NodePool: the memory of the allocator's block sets' nodes, all of one size, kept on a free list
// and carved from large chunks: an insert or erase costs a pointer swap, not a malloc or free (the sets
// change at every simulated allocation and free). Not thread-safe: one simulated allocator's own.
#pragma once

#include <cstddef>
#include <memory>
#include <memory_resource>
#include <vector>

namespace census::alloc {

class NodePool final : public std::pmr::memory_resource {
 private:
  void* do_allocate(size_t bytes, size_t alignment) override {
    if (node_ == 0) node_ = bytes;
    if (bytes != node_ || alignment > alignof(std::max_align_t)) return std::pmr::new_delete_resource()->allocate(bytes, alignment);
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
  void do_deallocate(void* p, size_t bytes, size_t alignment) override {
    if (bytes != node_ || alignment > alignof(std::max_align_t)) return std::pmr::new_delete_resource()->deallocate(p, bytes, alignment);
    free_ = new (p) Free{free_};
  }
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override { return this == &other; }

  struct Free {
    Free* next;
  };
  static constexpr size_t kChunk = 64 * 1024;
  size_t node_ = 0;  // the one size this pool keeps: the first asked for
  Free* free_ = nullptr;
  size_t used_ = 0;
  std::vector<std::unique_ptr<std::max_align_t[]>> chunks_;
};

}  // namespace census::alloc
