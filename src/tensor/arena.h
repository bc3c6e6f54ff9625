// File: arena.h
// Arena: the memory a census's tensors, storages and graph nodes live in. A census makes many small
// objects and drops them all at its end, so it bumps a pointer through blocks it keeps for the next
// census, on any thread, instead of calling malloc and free for each (they were a third of a census's
// time). Objects are still destroyed one by one, when their last handle goes, and their memory is
// reused by the census's next objects of the same size (Note [Arena memory reused]); the blocks are
// given back at once, when the arena dies.
//
// Not for: anything that outlives its census.
//
// Note [Arena memory reused] A whole step makes millions of tensors and nodes, a few thousand live at
// a time: an arena that only bumped grew with every object the step ever made (hundreds of MiB, paged
// in one fault at a time, for a pipeline stage of a large MoE model). So a destroyed object's memory
// goes on a free list of its size class (16-byte steps), which the next object of that class takes
// first. An object carries its arena's serial and its size class (RefCounted::arena_tag); its memory
// is reused only where its arena is the thread's current one: an outer census's object released while
// an inner census runs leaves its memory unused, as an object from an arena now gone would (that is a
// defect, but it may not corrupt a live arena's memory).
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

  // Memory for an object of `bytes` (alignment at most kObjectAlignment) and the tag it carries
  // (RefCounted::arena_tag): a destroyed object's of its size class where there is one. Inline: a
  // census allocates millions of times.
  void* allocate_object(size_t bytes, uint32_t& tag) {
    const size_t size_class = (bytes + kObjectAlignment - 1) / kObjectAlignment;
    if (size_class >= kSizeClasses) {
      tag = 0;  // not reused
      return allocate(bytes, kObjectAlignment);
    }
    tag = serial_ << 8 | static_cast<uint32_t>(size_class);
    if (FreeObject* reused = free_[size_class]) {
      free_[size_class] = reused->next;
      return reused;
    }
    return allocate(size_class * kObjectAlignment, kObjectAlignment);
  }
  static constexpr size_t kObjectAlignment = 16;

  // `alignment` a power of two.
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
  friend void give_back_to_arena(void* memory, uint32_t tag);
  struct FreeObject {
    FreeObject* next;
  };
  static constexpr size_t kSizeClasses = 256;  // the tag's low byte: objects up to 4,080 bytes

  static constinit thread_local Arena* g_current;
  void* allocate_in_new_block(size_t bytes, size_t alignment);
  static std::byte* align_up(std::byte* at, size_t alignment) {
    const auto address = reinterpret_cast<uintptr_t>(at);
    return reinterpret_cast<std::byte*>((address + alignment - 1) & ~(alignment - 1));
  }

  static constexpr size_t kBlockBytes = 64 * 1024;
  struct Block {
    std::byte* start = nullptr;
    size_t size = 0;
    std::unique_ptr<std::byte[]> memory;  // a block of its own (an object larger than a block); else none
  };
  std::vector<Block> blocks_;
  std::byte* next_ = nullptr;
  std::byte* end_ = nullptr;
  const uint32_t serial_ = next_serial();  // 24 bits in a tag, never 0
  FreeObject* free_[kSizeClasses] = {};
  static uint32_t next_serial();
};

// A new object in the current arena, held by a Ref (tensor/ref.h): destroyed when its last handle
// goes, its memory given back with the arena's.
template <class T, class... Args>
Ref<T> arena_shared(Args&&... args) {
  static_assert(alignof(T) <= Arena::kObjectAlignment);
  uint32_t tag = 0;
  void* memory = Arena::current()->allocate_object(sizeof(T), tag);
  T* object = new (memory) T(std::forward<Args>(args)...);
  object->RefCounted::set_arena_tag(tag);
  return Ref<T>(object);
}

}  // namespace census
