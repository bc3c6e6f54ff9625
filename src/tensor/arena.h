// File: arena.h
// Arena: the memory a census's tensors, storages and graph nodes live in. A census makes a few
// thousand small objects and drops them all at its end, so it bumps a pointer through blocks it keeps
// for the thread's next census instead of calling malloc and free for each (they were a third of a
// census's time). Objects are still destroyed one by one, when their last handle goes: only their
// memory is given back at once, when the arena dies.
//
// Not for: anything that outlives its census.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "tensor/ref.h"

namespace census {

class Arena {
 public:
  Arena() = default;
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  void* allocate(size_t bytes, size_t alignment);

  // The arena objects of this thread are made in (set by the census Session).
  static Arena* current();
  static void set_current(Arena* arena);

 private:
  static constexpr size_t kBlockBytes = 64 * 1024;
  struct Block {
    std::unique_ptr<std::byte[]> memory;
    size_t size;
  };
  std::vector<Block> blocks_;
  std::byte* next_ = nullptr;
  std::byte* end_ = nullptr;
};

// A standard allocator over an Arena, for std::allocate_shared. Deallocation is a no-op.
template <class T>
struct ArenaAllocator {
  using value_type = T;
  explicit ArenaAllocator(Arena* arena) : arena(arena) {}
  template <class U>
  ArenaAllocator(const ArenaAllocator<U>& other) : arena(other.arena) {}  // NOLINT(google-explicit-constructor)
  T* allocate(size_t n) { return static_cast<T*>(arena->allocate(n * sizeof(T), alignof(T))); }
  void deallocate(T*, size_t) {}
  template <class U>
  bool operator==(const ArenaAllocator<U>& other) const { return arena == other.arena; }
  Arena* arena;
};

// A new object in the current arena, held by a Ref.
template <class T, class... Args>
Ref<T> arena_shared(Args&&... args) {
  return allocate_ref<T>(ArenaAllocator<T>(Arena::current()), std::forward<Args>(args)...);
}

}  // namespace census
