// expandable_segments:True (Note [Expandable Segments] of CUDACachingAllocator.cpp): one segment per
// pool and stream, an address space of 1 1/8 of the device's memory of which pages are mapped as
// blocks need them (2 MiB pages in the small pool, 20 MiB in the large), unmapped again when the cache
// is flushed. A mapping is counted in reserved bytes, not as a segment.
#include <cassert>

#include "alloc/caching_allocator.h"

namespace census::alloc {
namespace {

constexpr int64_t kLargestTotal = int64_t{8} << 40;  // an address space stays inside its 16 TiB slot

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

// try_allocate_expandable_block: a run of free and unmapped blocks holding `size`, its unmapped part
// mapped page by page from its start,
//   if (!candidate->mapped && !map_block(candidate, std::min(candidate->size, size), ctx)) { return nullptr; }
//   while (candidate->size < size) { // invariant: free -> unmapped -> *
//     auto remaining = size - candidate->size; auto new_candidate = candidate->next;
//     if (!map_block(new_candidate, std::min(remaining, candidate->next->size), ctx)) { return nullptr; }
//     candidate = new_candidate; }
//   pool->blocks.erase(candidate);
BlockId CachingAllocator::try_allocate_expandable_block(int32_t stream, bool small, int64_t size) {
  BlockId candidate = find_expandable_block(stream, small, size);
  if (!blocks_[static_cast<size_t>(candidate)].mapped &&
      !map_block(candidate, std::min(blocks_[static_cast<size_t>(candidate)].size, size)))
    return -1;
  while (blocks_[static_cast<size_t>(candidate)].size < size) {
    const int64_t remaining = size - blocks_[static_cast<size_t>(candidate)].size;
    const BlockId next = blocks_[static_cast<size_t>(candidate)].next;
    if (!map_block(next, std::min(remaining, blocks_[static_cast<size_t>(next)].size))) return -1;
    candidate = next;
  }
  erase_free(candidate);
  return candidate;
}

// find_expandable_block: "returns the smallest possible address in any segment where there is enough
// free address space to fit size", an unmapped block (or the free block just before it) from which
// free and unmapped blocks hold `size`,
//   if (allocatable(c->prev)) { c = c->prev; } if (has_available_address_space(c)) { return c; }
// else a new segment: its whole address space one unmapped block,
//   auto segment_size = pool->is_small ? kSmallBuffer : kLargeBuffer;
//   size_t address_space_size = prop.totalGlobalMem + prop.totalGlobalMem / 8;
BlockId CachingAllocator::find_expandable_block(int32_t stream, bool small, int64_t size) {
  BlockPool& p = pool(small);
  auto has_available_address_space = [&](BlockId b) {
    int64_t bytes = 0;
    while (bytes < size && allocatable(b)) {
      bytes += blocks_[static_cast<size_t>(b)].size;
      b = blocks_[static_cast<size_t>(b)].next;
    }
    return bytes >= size;
  };
  for (auto it = p.unmapped.lower_bound(AddressKey{stream, 0, -1}); it != p.unmapped.end() && it->stream == stream; ++it) {
    BlockId c = it->id;
    if (allocatable(blocks_[static_cast<size_t>(c)].prev)) c = blocks_[static_cast<size_t>(c)].prev;
    if (has_available_address_space(c)) return c;
  }
  ExpandableSegment segment;
  segment.slot = take_slot();
  segment.segment_size = small ? kSmallBuffer : kLargeBuffer;
  const int64_t total = std::min(device_total_, kLargestTotal);
  segment.max_handles = ceil_div(total + total / 8, segment.segment_size);
  expandable_segments_.push_back(segment);
  Block whole;
  whole.size = segment.max_handles * segment.segment_size;
  whole.ptr = segment.slot << kSlotShift;
  whole.stream = stream;
  whole.small = small;
  whole.expandable = static_cast<int32_t>(expandable_segments_.size() - 1);
  whole.mapped = false;
  const BlockId candidate = new_block(whole);
  insert_unmapped(candidate);
  return candidate;
}

// map_block: pages for [ptr, ptr + size) (whole pages: the range mapped may be larger), the rest of
// the unmapped block left after it, the block merged with free neighbours:
//   auto mapped_range = to_map->expandable_segment_->map(SegmentRange{to_map->ptr, size});
//   if (mapped_range.size == 0) { return false; }  // failed to map the memory
//   ... if (mapped_range.size < to_map->size) { ... remaining->splice(to_map, to_map->next); ... }
//   try_merge_blocks(to_map, to_map->prev, pool); try_merge_blocks(to_map, to_map->next, pool);
//   pool.insert_into_blocks(to_map); ... increase_stat(stats.reserved_bytes[stat_type], mapped_range.size);
// ExpandableSegment::map creates one physical handle a page and gives them all back where one fails
// (cuMemCreate: CUDA_ERROR_OUT_OF_MEMORY): the pages fit under the device limit, or none is mapped.
bool CachingAllocator::map_block(BlockId to_map, int64_t size) {
  const Block b = blocks_[static_cast<size_t>(to_map)];
  assert(!b.mapped && size <= b.size);
  const ExpandableSegment& segment = expandable_segments_[static_cast<size_t>(b.expandable)];
  const int64_t base = segment.slot << kSlotShift;
  const int64_t begin = (b.ptr - base) / segment.segment_size;  // segmentLeft
  const int64_t end = ceil_div(b.ptr + size - base, segment.segment_size);  // segmentRight
  const int64_t mapped_size = (end - begin) * segment.segment_size;
  if (mapped_size == 0 || !device_has(mapped_size)) return false;
  erase_unmapped(to_map);
  blocks_[static_cast<size_t>(to_map)].mapped = true;
  if (mapped_size < b.size) {
    Block rest = b;
    rest.size = b.size - mapped_size;
    rest.ptr = b.ptr + mapped_size;
    rest.mapped = false;
    const BlockId remaining = new_block(rest);
    splice(remaining, to_map, b.next);
    insert_unmapped(remaining);
    blocks_[static_cast<size_t>(to_map)].size = mapped_size;
  }
  try_merge_blocks(to_map, blocks_[static_cast<size_t>(to_map)].prev);
  try_merge_blocks(to_map, blocks_[static_cast<size_t>(to_map)].next);
  insert_free(to_map);
  stats_.reserved_bytes.increase(mapped_size);
  ++stats_.num_device_alloc;
  if (listener_) listener_->on_map(segment.slot, b.ptr - base, mapped_size);
  return true;
}

// unmap_block: the whole pages inside a free block given back, its ends before and after them left
// free (mapped), the unmapped part merged with unmapped neighbours:
//   auto unmapped = block->expandable_segment_->unmap(SegmentRange{block->ptr, block->size});
//   if (unmapped.size == 0) { return; }
//   ... if (before_size > 0) { ... before_free->splice(block->prev, block); ... }
//   ... if (after_size > 0) { ... after_free->splice(block, block->next); ... }
//   ... block->mapped = false; try_merge_blocks(block, block->prev, *block->pool); ...
//   decrease_stat(stats.reserved_bytes[stat_type], unmapped.size);
void CachingAllocator::unmap_block(BlockId id) {
  const Block b = blocks_[static_cast<size_t>(id)];
  const ExpandableSegment& segment = expandable_segments_[static_cast<size_t>(b.expandable)];
  const int64_t base = segment.slot << kSlotShift;
  const int64_t begin = ceil_div(b.ptr - base, segment.segment_size);  // segmentRight
  const int64_t end = (b.ptr + b.size - base) / segment.segment_size;  // segmentLeft
  if (begin >= end) return;
  erase_free(id);
  const int64_t unmapped_ptr = base + begin * segment.segment_size;
  const int64_t unmapped_size = (end - begin) * segment.segment_size;
  const int64_t before_size = unmapped_ptr - b.ptr;
  if (before_size > 0) {
    Block before = b;
    before.size = before_size;
    const BlockId before_free = new_block(before);
    splice(before_free, b.prev, id);
    insert_free(before_free);
  }
  const int64_t after_size = b.size - (before_size + unmapped_size);
  if (after_size > 0) {
    Block after = b;
    after.size = after_size;
    after.ptr = unmapped_ptr + unmapped_size;
    const BlockId after_free = new_block(after);
    splice(after_free, id, blocks_[static_cast<size_t>(id)].next);
    insert_free(after_free);
  }
  Block& block = blocks_[static_cast<size_t>(id)];
  block.ptr = unmapped_ptr;
  block.size = unmapped_size;
  block.mapped = false;
  try_merge_blocks(id, blocks_[static_cast<size_t>(id)].prev);
  try_merge_blocks(id, blocks_[static_cast<size_t>(id)].next);
  insert_unmapped(id);
  stats_.reserved_bytes.decrease(unmapped_size);
  ++stats_.num_device_free;
  if (listener_) listener_->on_unmap(segment.slot, unmapped_ptr - base, unmapped_size);
}

// release_expandable_segment: a segment with no page mapped, its address space given back.
void CachingAllocator::release_expandable_segment(BlockId id) {
  const Block& b = blocks_[static_cast<size_t>(id)];
  ExpandableSegment& segment = expandable_segments_[static_cast<size_t>(b.expandable)];
  assert(!b.mapped && b.size == segment.max_handles * segment.segment_size);
  segment.live = false;
  give_slot(segment.slot);
  erase_unmapped(id);
  delete_block(id);
}

}  // namespace census::alloc
