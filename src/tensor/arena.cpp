#include "tensor/arena.h"

#include <cassert>

namespace census {
namespace {

thread_local Arena* g_current_arena = nullptr;

// Blocks a finished census gave back, for the thread's next one: fresh memory would be paged in
// again on every census.
thread_local std::vector<std::unique_ptr<std::byte[]>> g_spare_blocks;

}  // namespace

Arena* Arena::current() {
  assert(g_current_arena != nullptr && "no census Session is running");
  return g_current_arena;
}

void Arena::set_current(Arena* arena) { g_current_arena = arena; }

Arena::~Arena() {
  for (Block& block : blocks_)
    if (block.size == kBlockBytes) g_spare_blocks.push_back(std::move(block.memory));
}

void* Arena::allocate(size_t bytes, size_t alignment) {
  auto aligned = [&](std::byte* p) {
    const auto address = reinterpret_cast<uintptr_t>(p);
    return reinterpret_cast<std::byte*>((address + alignment - 1) & ~(alignment - 1));
  };
  std::byte* start = next_ ? aligned(next_) : nullptr;
  if (start == nullptr || start + bytes > end_) {
    const size_t size = bytes + alignment > kBlockBytes ? bytes + alignment : kBlockBytes;
    std::unique_ptr<std::byte[]> memory;
    if (size == kBlockBytes && !g_spare_blocks.empty()) {
      memory = std::move(g_spare_blocks.back());
      g_spare_blocks.pop_back();
    } else {
      memory.reset(new std::byte[size]);  // no zeroing: the memory is written before it is read
    }
    next_ = memory.get();
    end_ = next_ + size;
    blocks_.push_back({std::move(memory), size});
    start = aligned(next_);
  }
  next_ = start + bytes;
  return start;
}

}  // namespace census
