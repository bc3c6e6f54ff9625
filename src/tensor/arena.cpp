#include "tensor/arena.h"

#include <atomic>
#include <cassert>
#include <mutex>

#include "util/huge_pages.h"

namespace census {
namespace {

// Blocks finished censuses gave back, for the next census on any thread: fresh memory would be paged
// in again on every census, and a search's worker threads end with each batch of jobs (Note [Recycled
// buffers], util/recycled.h). Fresh blocks are cut from slabs of one huge page each (Note [Huge pages
// for large buffers], util/huge_pages.h). Blocks and slabs live as long as the process.
struct SpareBlocks {
  std::mutex mutex;
  std::vector<std::byte*> blocks;
  std::vector<std::byte*> slabs;
  size_t cut = 0;  // of the last slab, the bytes cut into blocks
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
    if (!block.memory) spares.blocks.push_back(block.start);
}

void* Arena::allocate_in_new_block(size_t bytes, size_t alignment) {
  static_assert(kHugePageBytes % kBlockBytes == 0);
  Block block;
  if (bytes + alignment > kBlockBytes) {  // an object larger than a block: a block of its own
    block.size = bytes + alignment;
    block.memory.reset(new std::byte[block.size]);  // no zeroing: the memory is written before it is read
    block.start = block.memory.get();
  } else {
    block.size = kBlockBytes;
    SpareBlocks& spares = spare_blocks();
    std::lock_guard<std::mutex> lock(spares.mutex);
    if (!spares.blocks.empty()) {
      block.start = spares.blocks.back();
      spares.blocks.pop_back();
    } else {
      if (spares.slabs.empty() || spares.cut == kHugePageBytes) {
        spares.slabs.push_back(static_cast<std::byte*>(allocate_large(kHugePageBytes)));
        spares.cut = 0;
      }
      block.start = spares.slabs.back() + spares.cut;
      spares.cut += kBlockBytes;
    }
  }
  std::byte* start = align_up(block.start, alignment);
  next_ = start + bytes;
  end_ = block.start + block.size;
  blocks_.push_back(std::move(block));
  return start;
}

}  // namespace census
