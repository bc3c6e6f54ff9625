#include "tensor/arena.h"

#include <atomic>
#include <cassert>
#include <mutex>

namespace census {
namespace {

// Blocks finished censuses gave back, for the next census on any thread: fresh memory would be paged
// in again on every census, and a search's worker threads end with each batch of jobs (Note [Recycled
// buffers], util/recycled.h).
struct SpareBlocks {
  std::mutex mutex;
  std::vector<std::unique_ptr<std::byte[]>> blocks;
};
SpareBlocks& spare_blocks() {
  static SpareBlocks spares;
  return spares;
}

}  // namespace

constinit thread_local Arena* Arena::g_current = nullptr;

// Serials are counted across threads, so that an object another thread's census made (a defect) is
// never taken for this census's.
uint32_t Arena::next_serial() {
  static std::atomic<uint32_t> last{0};
  uint32_t serial = 0;
  while (serial == 0) serial = ++last & 0xFFFFFF;
  return serial;
}

void give_back_to_arena(void* memory, uint32_t tag) {
  Arena* arena = Arena::g_current;
  const uint32_t size_class = tag & 0xFF;
  if (arena == nullptr || tag >> 8 != arena->serial_ || size_class == 0) return;
  auto* freed = static_cast<Arena::FreeObject*>(memory);
  freed->next = arena->free_[size_class];
  arena->free_[size_class] = freed;
}

Arena::~Arena() {
  SpareBlocks& spares = spare_blocks();
  std::lock_guard<std::mutex> lock(spares.mutex);
  for (Block& block : blocks_)
    if (block.size == kBlockBytes) spares.blocks.push_back(std::move(block.memory));
}

void* Arena::allocate_in_new_block(size_t bytes, size_t alignment) {
  const size_t size = bytes + alignment > kBlockBytes ? bytes + alignment : kBlockBytes;
  std::unique_ptr<std::byte[]> memory;
  if (size == kBlockBytes) {
    SpareBlocks& spares = spare_blocks();
    std::lock_guard<std::mutex> lock(spares.mutex);
    if (!spares.blocks.empty()) {
      memory = std::move(spares.blocks.back());
      spares.blocks.pop_back();
    }
  }
  if (!memory) {
    memory.reset(new std::byte[size]);  // no zeroing: the memory is written before it is read
  }
  std::byte* start = align_up(memory.get(), alignment);
  next_ = start + bytes;
  end_ = memory.get() + size;
  blocks_.push_back({std::move(memory), size});
  return start;
}

}  // namespace census
