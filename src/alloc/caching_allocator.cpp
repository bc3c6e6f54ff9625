#include "alloc/caching_allocator.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <optional>

namespace census::alloc {
namespace {

// a + b, held at the largest int64 (a limit of kNoSplitLimit plus a size).
int64_t saturating_add(int64_t a, int64_t b) { return a > kNoSplitLimit - b ? kNoSplitLimit : a + b; }

// The largest request a segment slot holds (16 TiB): more than any device has, so out of memory.
constexpr int64_t kLargestRequest = int64_t{1} << kSlotShift;

}  // namespace

CachingAllocator::CachingAllocator(AllocConf conf, int64_t device_limit, int64_t device_total,
                                   AllocatorListener* listener)
    : conf_(std::move(conf)), device_limit_(device_limit), device_total_(device_total), listener_(listener) {}

std::vector<int64_t> CachingAllocator::layout(const std::function<int64_t(BlockId)>& owner) const {
  std::vector<BlockId> live;
  for (size_t id = 0; id < blocks_.size(); ++id)
    if (blocks_[id].size >= 0) live.push_back(static_cast<BlockId>(id));
  std::sort(live.begin(), live.end(), [&](BlockId a, BlockId b) {
    return blocks_[static_cast<size_t>(a)].ptr < blocks_[static_cast<size_t>(b)].ptr;
  });
  std::vector<int64_t> out;
  out.reserve(3 * live.size() + free_slots_.size() + 1);
  for (BlockId id : live) {
    const Block& b = blocks_[static_cast<size_t>(id)];
    out.push_back(b.ptr);
    out.push_back(b.size * 4 + (b.mapped ? 2 : 0) + (b.allocated ? 1 : 0));
    if (b.allocated) out.push_back(owner(id));
  }
  out.insert(out.end(), free_slots_.begin(), free_slots_.end());
  out.push_back(next_slot_);
  return out;
}

void CachingAllocator::reset_peak_stats() {
  for (Stat* s : {&stats_.allocated_bytes, &stats_.reserved_bytes, &stats_.requested_bytes,
                  &stats_.inactive_split_bytes, &stats_.inactive_split, &stats_.segment, &stats_.allocation})
    s->peak = s->current;
}

// roundup_power2_next_division and round_size:
//   if (size < kMinBlockSize) { return kMinBlockSize; } else {
//     auto divisions = CUDAAllocatorConfig::roundup_power2_divisions(size);
//     if (divisions > 1 && size > (kMinBlockSize * divisions)) {
//       return roundup_power2_next_division(size, divisions);
//     } else { return kMinBlockSize * ((size + kMinBlockSize - 1) / kMinBlockSize); } }
// where roundup_power2_next_division splits [2^k, 2^(k+1)) into `divisions` equal steps (a power of
// two is returned as it is) and rounds up to the next step: 1200 in 4 divisions -> 1280.
int64_t CachingAllocator::round_size(int64_t size, const AllocConf& conf) {
  if (size < kMinBlockSize) return kMinBlockSize;
  const int64_t divisions = conf.divisions_for(size);
  if (divisions > 1 && size > kMinBlockSize * divisions) {
    const auto u = static_cast<uint64_t>(size);
    if (std::has_single_bit(u)) return size;
    const uint64_t power2_floor = std::bit_floor(u);
    // power2_floor >> (63 - countLeadingZeros(divisions)): divisions taken at its power-of-two floor
    const uint64_t step = power2_floor >> (std::bit_width(static_cast<uint64_t>(divisions)) - 1);
    if (step == 0) return static_cast<int64_t>(power2_floor << 1);
    const uint64_t floor = u & ~(step - 1);
    return static_cast<int64_t>(floor == u ? u : floor + step);
  }
  return kMinBlockSize * ((size + kMinBlockSize - 1) / kMinBlockSize);
}

// get_allocation_size:
//   if (size <= kSmallSize) { return kSmallBuffer; } else if (size < kMinLargeAlloc) {
//     return kLargeBuffer; } else { return kRoundLarge * ((size + kRoundLarge - 1) / kRoundLarge); }
int64_t CachingAllocator::get_allocation_size(int64_t size) {
  if (size <= kSmallSize) return kSmallBuffer;
  if (size < kMinLargeAlloc) return kLargeBuffer;
  return kRoundLarge * ((size + kRoundLarge - 1) / kRoundLarge);
}

// malloc:
//   size_t size = round_size(orig_size); auto& pool = get_pool(size, stream);
//   bool block_found = get_free_block(params) || ...;
//   if (!block_found) { block_found = alloc_block(params, false, context, lock)
//         || (release_available_cached_blocks(params, context) && alloc_block(params, false, context, lock))
//         || (C10_LIKELY(captures_underway.empty()) && release_cached_blocks(context) &&
//             alloc_block(params, true, context, lock)); }
//   if (!block_found) { ... stats.num_ooms += 1; ... "CUDA out of memory. Tried to allocate ..." }
//   bool split_remainder = should_split(params.block, params.size());
//   return alloc_found_block(params, orig_size, std::move(context), split_remainder);
[[gnu::flatten]] BlockId CachingAllocator::malloc(int64_t orig_size, int32_t stream) {
  assert(stream >= 0 && stream < 256);
  if (orig_size >= kLargestRequest) {
    ++stats_.num_ooms;
    if (listener_) listener_->on_out_of_memory(orig_size);
    return kOutOfMemory;
  }
  const int64_t size = round_size(orig_size, conf_);
  // get_pool: if (size <= kSmallSize) { return small_blocks; } else { return large_blocks; }
  AllocParams p{size, stream, size <= kSmallSize, get_allocation_size(size)};
  bool found = get_free_block(p);
  if (!found)
    found = alloc_block(p, false) || (release_available_cached_blocks(p) && alloc_block(p, false)) ||
            (!failed_ && release_cached_blocks() && alloc_block(p, true));
  if (!found || failed_) {
    failed_ = false;
    ++stats_.num_ooms;
    if (listener_) listener_->on_out_of_memory(orig_size);
    return kOutOfMemory;
  }
  return alloc_found_block(p, orig_size, should_split(blocks_[static_cast<size_t>(p.block)], size));
}

// get_free_block: the smallest free block of the pool and stream that holds the request,
//   auto it = pool.blocks.lower_bound(&p.search_key);
//   if (it == pool.blocks.end() || (*it)->stream != p.stream()) return false;
// an expandable block judged by the size it can grow to (the unmapped space after it),
//   auto expandable_size = [](Block* b) {
//     return b->size + (b->next && !b->next->mapped ? b->next->size : 0); };
// and the oversize rules:
//   // Do not return an oversized block for a large request
//   if ((p.size() < max_split_size()) && ((*it)->size >= max_split_size())) return false;
//   // Allow oversized block size to be rounded up but within a limit
//   if ((p.size() >= max_split_size()) && ((*it)->size >= p.size() + max_non_split_rounding_size()))
//     return false;
bool CachingAllocator::get_free_block(AllocParams& p) {
  SizeClassIndex<SizeKey>& free = pool(p.small).blocks;
  const SizeClassIndex<SizeKey>::Place place = free.find(SizeKey{p.stream, p.size, 0, -1});  // within the stream
  if (!place) return false;
  SizeKey it = *place.key;
  auto block = [&](const SizeKey& key) -> const Block& { return blocks_[static_cast<size_t>(key.id)]; };
  if (block(it).expandable >= 0) {
    if (conf_.expandable_segments) {
      auto expandable_size = [&](const Block& b) {
        return b.size + (b.next >= 0 && !blocks_[static_cast<size_t>(b.next)].mapped ? blocks_[static_cast<size_t>(b.next)].size : 0);
      };
      std::optional<SizeKey> next = free.next(it);
      while (block(it).expandable >= 0 && next && expandable_size(block(*next)) < expandable_size(block(it))) {
        it = *next;
        next = free.next(it);
      }
    } else {  // expandable segments turned off since: only the other blocks are found
      std::optional<SizeKey> next = it;
      do next = free.next(*next);
      while (next && block(*next).expandable >= 0);
      if (!next) return false;
      it = *next;
    }
  }
  const int64_t found = block(it).size;
  if (p.size < conf_.max_split_size && found >= conf_.max_split_size) return false;
  if (p.size >= conf_.max_split_size && found >= saturating_add(p.size, conf_.max_non_split_rounding_size)) return false;
  p.block = it.id;
  if (it.id == place.key->id) free.erase_at(place);  // the first found: erased where it was found
  else free.erase(it);
  return true;
}

// should_split:
//   size_t remaining = block->size - size;
//   if (block->pool->is_small || CUDAAllocatorConfig::expandable_segments()) {
//     return remaining >= kMinBlockSize;
//   } else { return (size < CUDAAllocatorConfig::max_split_size()) && (remaining > kSmallSize); }
bool CachingAllocator::should_split(const Block& block, int64_t size) const {
  const int64_t remaining = block.size - size;
  if (block.small || conf_.expandable_segments) return remaining >= kMinBlockSize;
  return size < conf_.max_split_size && remaining > kSmallSize;
}

// alloc_found_block: the front `size` bytes handed out, the rest left free in the pool,
//   block = new Block(device, stream, size, pool, block->ptr); ... block->next = remaining;
//   remaining->ptr = static_cast<char*>(remaining->ptr) + size; remaining->size -= size;
// with the inactive-split statistics (expandable segments excluded):
//   if (already_split && !block->expandable_segment_) {  // An already-split inactive block is being shrunk by size bytes.
//     decrease_stat_array(stats.inactive_split_bytes, block->size, params.stat_types);
//   } else if (!block->expandable_segment_) {  // A new split inactive block is being created from a previously unsplit block
//     increase_stat(stats.inactive_split_bytes[stat_type], remaining->size); increase_stat(stats.inactive_split[stat_type], 1);
//   } ... } else if (already_split && !block->expandable_segment_) {  // An already-split block is becoming active
//     decrease_stat(stats.inactive_split_bytes[stat_type], block->size); decrease_stat(stats.inactive_split[stat_type], 1);
BlockId CachingAllocator::alloc_found_block(const AllocParams& p, int64_t orig_size, bool split_remainder) {
  BlockId id = p.block;
  const bool already_split = blocks_[static_cast<size_t>(id)].is_split();
  const bool expandable = blocks_[static_cast<size_t>(id)].expandable >= 0;
  if (split_remainder) {
    const BlockId remaining = id;
    const Block& r = blocks_[static_cast<size_t>(remaining)];
    Block front;
    front.size = p.size;
    front.ptr = r.ptr;
    front.stream = r.stream;
    front.small = r.small;
    front.expandable = r.expandable;
    id = new_block(front);
    splice(id, blocks_[static_cast<size_t>(remaining)].prev, remaining);
    Block& rest = blocks_[static_cast<size_t>(remaining)];
    rest.ptr += p.size;
    rest.size -= p.size;
    insert_free(remaining);
    if (already_split && !expandable) {
      stats_.inactive_split_bytes.decrease(p.size);
    } else if (!expandable) {
      stats_.inactive_split_bytes.increase(rest.size);
      stats_.inactive_split.increase(1);
    }
  } else if (already_split && !expandable) {
    stats_.inactive_split_bytes.decrease(blocks_[static_cast<size_t>(id)].size);
    stats_.inactive_split.decrease(1);
  }
  Block& b = blocks_[static_cast<size_t>(id)];
  b.allocated = true;
  b.requested_size = orig_size;
  stats_.allocation.increase(1);
  stats_.allocated_bytes.increase(b.size);
  stats_.requested_bytes.increase(orig_size);
  if (listener_) listener_->on_alloc(b.ptr >> kSlotShift, b.ptr & (kLargestRequest - 1), b.size, orig_size);
  return id;
}

// free: decrease_stat(stats.allocation[stat_type], 1); decrease_stat(stats.allocated_bytes[stat_type],
// block->size); ... free_block(block, context) (no other stream used it: no events to wait for).
[[gnu::flatten]] void CachingAllocator::free(BlockId id) {
  Block& b = blocks_[static_cast<size_t>(id)];
  assert(b.allocated);
  b.allocated = false;
  stats_.allocation.decrease(1);
  stats_.allocated_bytes.decrease(b.size);
  if (listener_) listener_->on_free(b.ptr >> kSlotShift, b.ptr & (kLargestRequest - 1), b.size);
  free_block(id);
}

// free_block: merged with its free neighbours, back into its pool,
//   const std::array<Block*, 2> merge_candidates = {block->prev, block->next};
//   for (Block* merge_candidate : merge_candidates) {
//     const auto subsumed_size = try_merge_blocks(block, merge_candidate, pool);
//     if (subsumed_size > 0) { net_change_inactive_split_blocks -= 1; net_change_inactive_split_size -= subsumed_size; } }
//   ... if (block->is_split()) { net_change_inactive_split_blocks += 1; net_change_inactive_split_size += block->size; }
// the statistics not kept for an expandable block ("we simply just exclude expandable segments from
// inactive_split").
void CachingAllocator::free_block(BlockId id) {
  const int64_t requested = blocks_[static_cast<size_t>(id)].requested_size;
  int64_t net_blocks = 0, net_size = 0;
  const BlockId candidates[] = {blocks_[static_cast<size_t>(id)].prev, blocks_[static_cast<size_t>(id)].next};
  for (BlockId candidate : candidates) {
    const int64_t subsumed = try_merge_blocks(id, candidate);
    if (subsumed > 0) {
      net_blocks -= 1;
      net_size -= subsumed;
    }
  }
  insert_free(id);
  const Block& b = blocks_[static_cast<size_t>(id)];
  if (b.is_split()) {
    net_blocks += 1;
    net_size += b.size;
  }
  if (b.expandable < 0) {
    if (net_blocks > 0) stats_.inactive_split.increase(net_blocks);
    else stats_.inactive_split.decrease(-net_blocks);
    if (net_size > 0) stats_.inactive_split_bytes.increase(net_size);
    else stats_.inactive_split_bytes.decrease(-net_size);
  }
  stats_.requested_bytes.decrease(requested);
}

// try_merge_blocks: "combine previously split blocks. returns the size of the subsumed block, or 0 on
// failure", refused where
//   if (!src || src->allocated || src->event_count > 0 || !src->stream_uses.empty() || dst->mapped != src->mapped)
int64_t CachingAllocator::try_merge_blocks(BlockId dst, BlockId src) {
  if (src < 0) return 0;
  Block& s = blocks_[static_cast<size_t>(src)];
  Block& d = blocks_[static_cast<size_t>(dst)];
  if (s.allocated || d.mapped != s.mapped) return 0;
  if (s.mapped) erase_free(src);
  else erase_unmapped(src);
  if (d.prev == src) {  // [src dst]
    d.ptr = s.ptr;
    d.prev = s.prev;
    if (d.prev >= 0) blocks_[static_cast<size_t>(d.prev)].next = dst;
  } else {  // [dst src]
    d.next = s.next;
    if (d.next >= 0) blocks_[static_cast<size_t>(d.next)].prev = dst;
  }
  const int64_t subsumed = s.size;
  d.size += subsumed;
  delete_block(src);
  return subsumed;
}

// alloc_block: a new segment of alloc_size (expandable: pages mapped for the rounded size),
//   if (isRetry) { stats.num_alloc_retries += 1; }
//   ... p.err = cudaMallocMaybeCapturing(&ptr, size); ... if (p.err != cudaSuccess) { ... return false; }
//   total_allocated_memory += size; ... increase_stat(stats.segment[stat_type], 1);
//   increase_stat(stats.reserved_bytes[stat_type], size);
bool CachingAllocator::alloc_block(AllocParams& p, bool is_retry) {
  if (is_retry) ++stats_.num_alloc_retries;
  if (conf_.expandable_segments) {
    p.block = try_allocate_expandable_block(p.stream, p.small, p.size);
    return p.block >= 0;
  }
  if (!device_has(p.alloc_size)) return false;  // cudaErrorMemoryAllocation
  Block segment;
  segment.size = p.alloc_size;
  segment.ptr = take_slot() << kSlotShift;
  segment.stream = p.stream;
  segment.small = p.small;
  p.block = new_block(segment);
  stats_.segment.increase(1);
  stats_.reserved_bytes.increase(p.alloc_size);
  ++stats_.num_device_alloc;
  if (listener_) listener_->on_segment_alloc(segment.ptr >> kSlotShift, p.alloc_size);
  return true;
}

// release_available_cached_blocks: "Free one or more oversize blocks to the system allocator. But only
// enough to satisfy the target size", nothing where max_split_size is unset:
//   key.size = (key.size < max_split_size()) ? max_split_size() : key.size;
//   auto it = pool.blocks.lower_bound(&key);
//   if (it == pool.blocks.end() || (*it)->stream != p.stream()) {
//     // No single block is large enough; free multiple oversize blocks, starting with the largest
//     if (it == pool.blocks.begin()) return false;
//     size_t totalReleased = 0; --it;
//     while ((totalReleased < key.size) && ((*it)->size >= max_split_size()) && ((*it)->stream == p.stream())) {
//       auto cur = it; totalReleased += (*it)->size;
//       if (it != pool.blocks.begin()) { --it; release_block(*cur, context); } else { release_block(*cur, context); break; } }
//     if (totalReleased < key.size) return false;
//   } else { release_block(*it, context); }
bool CachingAllocator::release_available_cached_blocks(const AllocParams& p) {
  if (conf_.max_split_size == kNoSplitLimit) return false;
  SizeClassIndex<SizeKey>& free = pool(p.small).blocks;
  const int64_t key_size = std::max(p.size, conf_.max_split_size);
  std::optional<SizeKey> it = free.lower_bound(SizeKey{p.stream, key_size, 0, -1});
  if (it) {
    release_block(it->id);
    return !failed_;
  }
  // the key before lower_bound's: the stream's largest (another stream's, or none, releases nothing)
  it = free.last(p.stream);
  if (!it) return false;
  int64_t released = 0;
  while (released < key_size && it->size() >= conf_.max_split_size) {
    const BlockId current = it->id;
    released += it->size();
    const std::optional<SizeKey> before = free.prev(*it);
    release_block(current);
    if (!before) break;  // the stream's first: std::set's begin, or another stream's key before it
    it = before;
  }
  return released >= key_size && !failed_;
}

// release_cached_blocks: "Free all non-split cached blocks to system allocator",
//   release_blocks(large_blocks, context); release_blocks(small_blocks, context);
bool CachingAllocator::release_cached_blocks() {
  release_blocks(false);
  release_blocks(true);
  return true;
}

// release_blocks: every unsplit cached segment freed; an expandable one's free pages unmapped, and the
// segment released where nothing of it is left mapped:
//   if (block->expandable_segment_) { to_unmap.push_back(block); } else if (!block->prev && !block->next) {
//     release_block(block, context); }
//   for (Block* block : to_unmap) { unmap_block(block, context); if (!block->prev && !block->next) {
//     release_expandable_segment(block); } }
void CachingAllocator::release_blocks(bool small) {
  std::vector<BlockId> to_release, to_unmap;  // taken first: releasing a block erases it from the pool
  pool(small).blocks.for_each([&](const SizeKey& key) {
    const Block& b = blocks_[static_cast<size_t>(key.id)];
    if (b.expandable >= 0) to_unmap.push_back(key.id);
    else if (!b.is_split()) to_release.push_back(key.id);
  });
  for (BlockId id : to_release) release_block(id);
  for (BlockId id : to_unmap) {
    unmap_block(id);
    if (!blocks_[static_cast<size_t>(id)].is_split()) release_expandable_segment(id);
  }
}

// release_block: cudaFree of a whole cached segment,
//   TORCH_INTERNAL_ASSERT(!block->expandable_segment_); stats.num_device_free++; ...
//   decrease_stat(stats.segment[stat_type], 1); decrease_stat(stats.reserved_bytes[stat_type], block->size);
// An expandable block here fails PyTorch's assertion (release_available_cached_blocks under
// expandable segments and max_split_size_mb): the allocation fails with it.
void CachingAllocator::release_block(BlockId id) {
  const Block& b = blocks_[static_cast<size_t>(id)];
  if (b.expandable >= 0) {
    failed_ = true;
    return;
  }
  ++stats_.num_device_free;
  stats_.segment.decrease(1);
  stats_.reserved_bytes.decrease(b.size);
  if (listener_) listener_->on_segment_free(b.ptr >> kSlotShift, b.size);
  give_slot(b.ptr >> kSlotShift);
  erase_free(id);
  delete_block(id);
}

// A segment's address: the lowest slot no live segment holds.
int64_t CachingAllocator::take_slot() {
  if (free_slots_.empty()) return next_slot_++;
  const int64_t slot = *free_slots_.begin();
  free_slots_.erase(free_slots_.begin());
  return slot;
}

void CachingAllocator::give_slot(int64_t slot) { free_slots_.insert(slot); }

}  // namespace census::alloc
