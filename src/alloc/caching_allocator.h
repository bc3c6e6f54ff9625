// File: caching_allocator.h
// PyTorch's CUDA caching allocator, DeviceCachingAllocator of c10/cuda/CUDACachingAllocator.cpp, run
// over a trace of allocations and frees (size, stream) instead of a device. It knows nothing of
// tensors: the step (step/step_alloc.h) feeds it, as XLA's heap simulator is fed.
//
// The source followed is pytorch/pytorch at commit 001074d25084fdb87a799823e395a50f5ec044d3 (torch 2.x),
// with the one rule later 2.x releases made configurable: get_free_block's "within kLargeBuffer of
// the request" became max_non_split_rounding_size() (default kLargeBuffer), read from
// PYTORCH_CUDA_ALLOC_CONF's max_non_split_rounding_mb (alloc/alloc_conf.h). Each rule is one function
// below whose comment quotes the line it follows; the names are PyTorch's.
//
//   malloc(size, stream): round_size; the pool (small <= 1 MiB, else large); a best-fit free block of
//     the pool and stream (get_free_block), else a new segment (alloc_block: cudaMalloc of
//     get_allocation_size, or pages mapped onto an expandable segment), else free cached oversize
//     blocks and retry (release_available_cached_blocks), else free every unsplit cached segment and
//     retry (release_cached_blocks; num_alloc_retries), else out of memory; then split the block
//     (should_split) and hand it out.
//   free(block): back to its pool, merged with free neighbours (free_block, try_merge_blocks).
// The two are compiled [[gnu::flatten]]: every rule is inlined into them, as they run at every
// allocation and free of a step, and each stays a function of its own to read (docs/allocator.md,
// "Speed").
//
// What the simulation leaves out, and why it may: events and streams used by other streams (recordStream;
// a step runs on one stream), CUDA graphs' private pools, garbage_collection_threshold (it acts only
// under set_per_process_memory_fraction), the free-memory callbacks (IPC). cudaMalloc fails when the
// segment would take the reserved bytes past the device limit (the memory the process may use), and
// its addresses are simulated (alloc/segment_addresses, in caching_allocator.cpp): segment k of the
// ones alive at once starts at k << 44, the lowest free k first, which orders equal-size free blocks
// as cudaMalloc's reuse of a freed range would.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <set>
#include <vector>

#include "alloc/alloc_conf.h"
#include "alloc/size_class_index.h"

namespace census::alloc {

inline constexpr int64_t kMinBlockSize = 512;         // all sizes are rounded to at least 512 bytes
inline constexpr int64_t kSmallSize = kMiB;           // largest "small" allocation is 1 MiB
inline constexpr int64_t kSmallBuffer = 2 * kMiB;     // "small" allocations are packed in 2 MiB blocks
inline constexpr int64_t kMinLargeAlloc = 10 * kMiB;  // allocations between 1 and 10 MiB may use kLargeBuffer
inline constexpr int64_t kRoundLarge = 2 * kMiB;      // round up large allocations to 2 MiB
inline constexpr int64_t kNoDeviceLimit = std::numeric_limits<int64_t>::max();

// A statistic as DeviceStats keeps it: its current value and its peak (increase_stat/decrease_stat).
struct Stat {
  int64_t current = 0;
  int64_t peak = 0;
  void increase(int64_t amount) {
    current += amount;
    if (current > peak) peak = current;
  }
  void decrease(int64_t amount) { current -= amount; }
};

// torch.cuda.memory_stats()'s aggregate ("all") figures that sizes decide.
struct AllocatorStats {
  Stat allocated_bytes;       // blocks handed out, at their block sizes: memory_allocated()
  Stat reserved_bytes;        // segments cudaMalloc'd and pages mapped: memory_reserved()
  Stat requested_bytes;       // the sizes the blocks were asked for
  Stat inactive_split_bytes;  // free blocks split off a segment still in use (expandable ones excluded)
  Stat inactive_split;
  Stat segment;               // cudaMalloc'd segments (an expandable segment's mappings are not counted)
  Stat allocation;
  int64_t num_alloc_retries = 0;  // allocations that needed every unsplit cached segment freed first
  int64_t num_ooms = 0;
  int64_t num_device_alloc = 0;   // cudaMalloc and map calls
  int64_t num_device_free = 0;    // cudaFree and unmap calls
};

// What the allocator does, for a test to log its whole call sequence (XLA's HeapCallRecorder): a
// segment reserved or released (cudaMalloc, cudaFree), pages mapped or unmapped (expandable segments),
// a block handed out or taken back, an allocation refused. A place is a segment's slot and an offset.
class AllocatorListener {
 public:
  virtual ~AllocatorListener() = default;
  virtual void on_segment_alloc(int64_t /*slot*/, int64_t /*bytes*/) {}
  virtual void on_segment_free(int64_t /*slot*/, int64_t /*bytes*/) {}
  virtual void on_map(int64_t /*slot*/, int64_t /*offset*/, int64_t /*bytes*/) {}
  virtual void on_unmap(int64_t /*slot*/, int64_t /*offset*/, int64_t /*bytes*/) {}
  virtual void on_alloc(int64_t /*slot*/, int64_t /*offset*/, int64_t /*bytes*/, int64_t /*requested*/) {}
  virtual void on_free(int64_t /*slot*/, int64_t /*offset*/, int64_t /*bytes*/) {}
  virtual void on_out_of_memory(int64_t /*requested*/) {}
};

using BlockId = int32_t;
inline constexpr BlockId kOutOfMemory = -1;

class CachingAllocator {
 public:
  // `device_limit`: the bytes cudaMalloc and cuMemCreate may reserve in all; `device_total`: the
  // device's memory, which sizes an expandable segment's address space (1 1/8 of it).
  explicit CachingAllocator(AllocConf conf, int64_t device_limit = kNoDeviceLimit,
                            int64_t device_total = int64_t{1} << 40, AllocatorListener* listener = nullptr);

  // A block for `size` bytes on `stream` (0 to 255), or kOutOfMemory where PyTorch raises
  // OutOfMemoryError.
  BlockId malloc(int64_t size, int32_t stream = 0);
  void free(BlockId block);

  const AllocatorStats& stats() const { return stats_; }
  // torch.cuda.reset_peak_memory_stats(): every peak set to its current value.
  void reset_peak_stats();
  int64_t block_size(BlockId block) const { return blocks_[static_cast<size_t>(block)].size; }

  // The state two moments compare by: each block in address order (its address, size, whether mapped,
  // and for an allocated one its owner's label, `owner(block)`), then the segment slots free and the
  // next new one. Two moments with equal layouts do the same from then on, given the same requests
  // and frees of the owners they match (block ids and the order blocks were made in decide nothing).
  std::vector<int64_t> layout(const std::function<int64_t(BlockId)>& owner) const;
  // The free and unmapped blocks cached: with the statistics' current values, a quick first comparison.
  size_t cached_blocks() const {
    return small_blocks_.blocks.size() + large_blocks_.blocks.size() + small_blocks_.unmapped.size() +
           large_blocks_.unmapped.size();
  }

  // The size a request is rounded to (round_size): 512 B, or a power-of-two division.
  static int64_t round_size(int64_t size, const AllocConf& conf);
  // The segment a new block of a rounded size gets (get_allocation_size).
  static int64_t get_allocation_size(int64_t size);

 private:
  struct Block {
    int64_t size = 0;
    int64_t requested_size = 0;
    int64_t ptr = 0;
    BlockId prev = -1, next = -1;  // neighbours in its segment
    int32_t stream = 0;
    int32_t expandable = -1;  // its expandable segment, or -1: a cudaMalloc'd segment
    bool small = false;       // its pool
    bool allocated = false;
    bool mapped = true;
    bool is_split() const { return prev >= 0 || next >= 0; }
  };
  // BlockComparatorSize: stream, size, address, packed into two numbers compared in turn (a stream
  // below 256, a size below 2^56: a larger one searched for is larger than any block); 24 bytes, as
  // the size classes' buckets move them (alloc/size_class_index.h).
  struct SizeKey {
    uint64_t stream_size;  // stream << 56 | size
    uint64_t ptr;
    BlockId id;
    SizeKey(int32_t stream, int64_t size, int64_t address, BlockId block)
        : stream_size(uint64_t{static_cast<uint8_t>(stream)} << 56 |
                      static_cast<uint64_t>(std::min(size, kLargestKeySize))),
          ptr(static_cast<uint64_t>(address)),
          id(block) {}
    int32_t stream() const { return static_cast<int32_t>(stream_size >> 56); }
    int64_t size() const { return static_cast<int64_t>(stream_size & static_cast<uint64_t>(kLargestKeySize)); }
    // (stream_size, ptr) compared as one 128-bit number: a compare and a subtract with borrow, no branch.
    bool operator<(const SizeKey& o) const { return wide() < o.wide(); }
    __extension__ using Wide = unsigned __int128;
    Wide wide() const { return static_cast<Wide>(stream_size) << 64 | ptr; }
    static constexpr int64_t kLargestKeySize = (int64_t{1} << 56) - 1;
  };
  struct AddressKey {
    int32_t stream;
    int64_t ptr;
    BlockId id;
    bool operator<(const AddressKey& o) const { return stream != o.stream ? stream < o.stream : ptr < o.ptr; }
  };
  // PyTorch's BlockPool: its free blocks by size class (Note [Free blocks by size class],
  // alloc/size_class_index.h), its unmapped ones (changed only as pages are mapped) in a std::set.
  struct BlockPool {
    SizeClassIndex<SizeKey> blocks;  // free, mapped
    std::set<AddressKey> unmapped;   // expandable segments' address space without pages
  };
  struct ExpandableSegment {
    int64_t slot;
    int64_t segment_size;  // its pages: 2 MiB (small pool), 20 MiB (large)
    int64_t max_handles;
    bool live = true;
  };
  struct AllocParams {
    int64_t size;  // rounded
    int32_t stream;
    bool small;
    int64_t alloc_size;
    BlockId block = -1;
  };

  // The rules, each after its namesake in DeviceCachingAllocator.
  bool get_free_block(AllocParams& p);
  bool should_split(const Block& block, int64_t size) const;
  BlockId alloc_found_block(const AllocParams& p, int64_t orig_size, bool split_remainder);
  bool alloc_block(AllocParams& p, bool is_retry);
  bool release_available_cached_blocks(const AllocParams& p);
  bool release_cached_blocks();
  void release_blocks(bool small);
  void release_block(BlockId block);
  void free_block(BlockId block);
  int64_t try_merge_blocks(BlockId dst, BlockId src);
  // Expandable segments (caching_allocator_expandable.cpp).
  BlockId try_allocate_expandable_block(int32_t stream, bool small, int64_t size);
  BlockId find_expandable_block(int32_t stream, bool small, int64_t size);
  bool map_block(BlockId to_map, int64_t size);
  void unmap_block(BlockId block);
  void release_expandable_segment(BlockId block);

  // The bookkeeping each allocation and free does several times, defined here to be inlined.
  BlockPool& pool(bool small) { return small ? small_blocks_ : large_blocks_; }
  Block& block(BlockId id) { return blocks_[static_cast<size_t>(id)]; }
  const Block& block(BlockId id) const { return blocks_[static_cast<size_t>(id)]; }
  static SizeKey size_key(const Block& b, BlockId id) { return SizeKey{b.stream, b.size, b.ptr, id}; }
  BlockId new_block(const Block& b) {
    if (free_ids_.empty()) {
      blocks_.push_back(b);
      return static_cast<BlockId>(blocks_.size() - 1);
    }
    const BlockId id = free_ids_.back();
    free_ids_.pop_back();
    block(id) = b;
    return id;
  }
  void delete_block(BlockId id) {
    block(id).size = -1;  // no block: left out of layout()
    free_ids_.push_back(id);
  }
  void insert_free(BlockId id) {
    const Block& b = block(id);
    pool(b.small).blocks.insert(size_key(b, id));
  }
  void erase_free(BlockId id) {
    const Block& b = block(id);
    pool(b.small).blocks.erase(size_key(b, id));
  }
  void insert_unmapped(BlockId id) {
    const Block& b = block(id);
    pool(b.small).unmapped.insert(AddressKey{b.stream, b.ptr, id});
  }
  void erase_unmapped(BlockId id) {
    const Block& b = block(id);
    pool(b.small).unmapped.erase(AddressKey{b.stream, b.ptr, id});
  }
  // Block::splice: `id` placed between `before` and `after`.
  void splice(BlockId id, BlockId before, BlockId after) {
    Block& b = block(id);
    b.prev = before;
    b.next = after;
    if (before >= 0) block(before).next = id;
    if (after >= 0) block(after).prev = id;
  }
  int64_t take_slot();
  void give_slot(int64_t slot);
  bool allocatable(BlockId b) const { return b >= 0 && !blocks_[static_cast<size_t>(b)].allocated; }
  bool device_has(int64_t bytes) const { return bytes <= device_limit_ - stats_.reserved_bytes.current; }

  AllocConf conf_;
  int64_t device_limit_;
  int64_t device_total_;
  AllocatorListener* listener_;
  AllocatorStats stats_;
  std::vector<Block> blocks_;
  std::vector<BlockId> free_ids_;
  BlockPool small_blocks_, large_blocks_;
  std::vector<ExpandableSegment> expandable_segments_;
  std::set<int64_t> free_slots_;
  int64_t next_slot_ = 0;
  bool failed_ = false;  // an expandable block met release_block: PyTorch's internal assert there
};

// The simulated address of a segment's slot: slot << kSlotShift.
inline constexpr int kSlotShift = 44;

}  // namespace census::alloc
