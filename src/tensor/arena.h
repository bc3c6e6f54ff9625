// File: arena.h
// Arena: the memory a census's tensors, storages and graph nodes live in. A census makes a few
// thousand small objects and drops them all at its end, so it bumps a pointer through blocks it keeps
// for the thread's next census instead of calling malloc and free for each (they were a third of a
// census's time). Objects are still destroyed one by one, when their last handle goes: only their
// memory is given back at once, when the arena dies.
//
// Not for: anything that outlives its census.
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <vector>

#include "tensor/ref.h"

namespace census {

class Arena {
 public:
  Arena() = default;
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // `alignment` a power of two. Inline: a census allocates a few thousand times.
  void* allocate(size_t bytes, size_t alignment) {
    std::byte* start = align_up(next_, alignment);
    if (next_ == nullptr || start + bytes > end_) return allocate_in_new_block(bytes, alignment);
    next_ = start + bytes;
    return start;
  }

  // The arena objects of this thread are made in (set by the census Session).
  static Arena* current() {
    assert(g_current != nullptr && "no census Session is running");
    return g_current;
  }
  static void set_current(Arena* arena) { g_current = arena; }

 private:
  static constinit thread_local Arena* g_current;
  void* allocate_in_new_block(size_t bytes, size_t alignment);
  static std::byte* align_up(std::byte* at, size_t alignment) {
    const auto address = reinterpret_cast<uintptr_t>(at);
    return reinterpret_cast<std::byte*>((address + alignment - 1) & ~(alignment - 1));
  }

  static constexpr size_t kBlockBytes = 64 * 1024;
  struct Block {
    std::unique_ptr<std::byte[]> memory;
    size_t size;
  };
  std::vector<Block> blocks_;
  std::byte* next_ = nullptr;
  std::byte* end_ = nullptr;
};

// A new object in the current arena, held by a Ref (tensor/ref.h): destroyed when its last handle
// goes, its memory given back with the arena's.
template <class T, class... Args>
Ref<T> arena_shared(Args&&... args) {
  void* memory = Arena::current()->allocate(sizeof(T), alignof(T));
  return Ref<T>(new (memory) T(std::forward<Args>(args)...));
}

}  // namespace census
