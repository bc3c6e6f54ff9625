// PyTorch's caching allocator over hand-made traces: each rule's trace is derived in comments from the
// lines of CUDACachingAllocator.cpp that alloc/caching_allocator.cpp quotes, and the whole call
// sequence (segments reserved and released, pages mapped, blocks handed out) is compared, as XLA's
// HeapSimulator tests compare a HeapCallRecorder's log. A place is "s<slot>+<offset>" (a segment's slot,
// the lowest free one first) and sizes are bytes. MiB = 1,048,576.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "alloc/caching_allocator.h"

namespace census::alloc {
namespace {

constexpr int64_t MiB = kMiB;

class CallRecorder final : public AllocatorListener {
 public:
  void on_segment_alloc(int64_t slot, int64_t bytes) override { log("cudaMalloc(s" + n(slot) + ", " + n(bytes) + ")"); }
  void on_segment_free(int64_t slot, int64_t bytes) override { log("cudaFree(s" + n(slot) + ", " + n(bytes) + ")"); }
  void on_map(int64_t slot, int64_t offset, int64_t bytes) override { log("Map(" + at(slot, offset) + ", " + n(bytes) + ")"); }
  void on_unmap(int64_t slot, int64_t offset, int64_t bytes) override { log("Unmap(" + at(slot, offset) + ", " + n(bytes) + ")"); }
  void on_alloc(int64_t slot, int64_t offset, int64_t bytes, int64_t requested) override {
    log("Alloc(" + at(slot, offset) + ", " + n(bytes) + ", " + n(requested) + ")");
  }
  void on_free(int64_t slot, int64_t offset, int64_t bytes) override { log("Free(" + at(slot, offset) + ", " + n(bytes) + ")"); }
  void on_out_of_memory(int64_t requested) override { log("OutOfMemory(" + n(requested) + ")"); }

  std::vector<std::string> calls;

 private:
  static std::string n(int64_t v) { return std::to_string(v); }
  static std::string at(int64_t slot, int64_t offset) { return "s" + n(slot) + "+" + n(offset); }
  void log(std::string call) { calls.push_back(std::move(call)); }
};

AllocConf conf(std::string_view text) {
  auto parsed = parse_alloc_conf(text);
  EXPECT_TRUE(parsed) << parsed.refusal().message();
  return parsed ? parsed.take() : AllocConf();
}

TEST(CachingAllocatorRules, RoundSize) {
  const AllocConf plain;
  EXPECT_EQ(CachingAllocator::round_size(1, plain), 512);     // size < kMinBlockSize: kMinBlockSize
  EXPECT_EQ(CachingAllocator::round_size(512, plain), 512);
  EXPECT_EQ(CachingAllocator::round_size(513, plain), 1024);  // up to a multiple of 512
  // roundup_power2_divisions:4: the divisions apply above 512 x 4 = 2048 B. 1200 KiB lies in
  // [1 MiB, 2 MiB), in steps of 256 KiB: 1280 KiB (the source's own example, 1200 -> 1280, in KiB)
  const AllocConf four = conf("roundup_power2_divisions:4");
  EXPECT_EQ(CachingAllocator::round_size(1200 * 1024, four), 1280 * 1024);
  EXPECT_EQ(CachingAllocator::round_size(2 * MiB, four), 2 * MiB);  // a power of two stays
  EXPECT_EQ(CachingAllocator::round_size(1280 * 1024, four), 1280 * 1024);  // on a step: stays
  EXPECT_EQ(CachingAllocator::round_size(1200, four), 1536);  // 1200 <= 2048: the plain 512 B rounding
  // 100 MiB + 1 with [64:8,>:2]: 100 MiB lies in [64 MiB, 128 MiB), interval 6, 8 divisions of 8 MiB:
  // the next step above 100 MiB is 104 MiB
  const AllocConf listed = conf("roundup_power2_divisions:[64:8,>:2]");
  EXPECT_EQ(CachingAllocator::round_size(100 * MiB + 1, listed), 104 * MiB);
  // 300 MiB in [256, 512): after the last boundary, 2 divisions of 128 MiB: 384 MiB
  EXPECT_EQ(CachingAllocator::round_size(300 * MiB, listed), 384 * MiB);
  // 3 MiB + 1 in [2 MiB, 4 MiB), interval 1, below the first boundary: 8 divisions of 256 KiB
  EXPECT_EQ(CachingAllocator::round_size(3 * MiB + 1, listed), 3 * MiB + 256 * 1024);
}

TEST(CachingAllocatorRules, AllocationSize) {
  EXPECT_EQ(CachingAllocator::get_allocation_size(512), 2 * MiB);              // <= 1 MiB: kSmallBuffer
  EXPECT_EQ(CachingAllocator::get_allocation_size(MiB), 2 * MiB);
  EXPECT_EQ(CachingAllocator::get_allocation_size(MiB + 512), 20 * MiB);       // < 10 MiB: kLargeBuffer
  EXPECT_EQ(CachingAllocator::get_allocation_size(10 * MiB - 512), 20 * MiB);
  EXPECT_EQ(CachingAllocator::get_allocation_size(10 * MiB), 10 * MiB);        // else up to 2 MiB
  EXPECT_EQ(CachingAllocator::get_allocation_size(15 * MiB), 16 * MiB);
}

// The small and large pools, and splitting: 100 B rounds to 512 and takes a new 2 MiB small segment,
// split (the small pool splits any remainder of 512 B or more); 1 MiB is still small and fits the
// remainder of s0 (2 MiB - 512 = 2,096,640 B), split again (1,048,064 B left); 1 MiB + 1 rounds to
// 1,049,088 B, large: a 20 MiB segment (under 10 MiB), split (19,922,432 B left, > 1 MiB); 10 MiB fits
// that remainder and is split from it (9,436,672 B left, > 1 MiB); 12 MiB + 100 rounds to 12,583,424 B,
// fits no free block, and takes a segment of its own rounded to 2 MiB: 14 MiB, split (2,096,640 left).
TEST(CachingAllocatorTrace, SmallAndLargePoolsSplit) {
  CallRecorder calls;
  CachingAllocator a(AllocConf(), kNoDeviceLimit, int64_t{1} << 40, &calls);
  a.malloc(100);
  a.malloc(MiB);
  a.malloc(MiB + 1);
  a.malloc(10 * MiB);
  a.malloc(12 * MiB + 100);
  EXPECT_EQ(calls.calls, (std::vector<std::string>{
                             "cudaMalloc(s0, 2097152)",
                             "Alloc(s0+0, 512, 100)",
                             "Alloc(s0+512, 1048576, 1048576)",
                             "cudaMalloc(s1, 20971520)",
                             "Alloc(s1+0, 1049088, 1048577)",
                             "Alloc(s1+1049088, 10485760, 10485760)",
                             "cudaMalloc(s2, 14680064)",
                             "Alloc(s2+0, 12583424, 12583012)",
                         }));
  const AllocatorStats& st = a.stats();
  EXPECT_EQ(st.reserved_bytes.current, 2 * MiB + 20 * MiB + 14 * MiB);
  EXPECT_EQ(st.allocated_bytes.current, 512 + 1048576 + 1049088 + 10485760 + 12583424);
  EXPECT_EQ(st.requested_bytes.current, 100 + 1048576 + 1048577 + 10485760 + 12583012);
  // the free remainders, each split off a segment in use: 1,048,064 + 9,436,672 + 2,096,640
  EXPECT_EQ(st.inactive_split_bytes.current, 1048064 + 9436672 + 2096640);
  EXPECT_EQ(st.inactive_split.current, 3);
  EXPECT_EQ(st.segment.current, 3);
}

// Splitting, best-fit reuse and coalescing in one 20 MiB segment: A (6 MiB) and B (6 MiB) split it,
// 8 MiB left free; A freed (an inactive split: 6 + 8 = 14 MiB); C (4 MiB) takes the best fit, A's
// 6 MiB block (not the 8 MiB one), split (2 MiB left, over 1 MiB); B freed merges with both free
// neighbours (2 + 6 + 8 = 16 MiB); C freed merges with it: the segment whole again, nothing split.
// inactive_split_bytes: 14 (A split) -> 8 (B shrinks the remainder by 6) -> 14 (A free) -> 10 (C
// takes 4 of A's 6) -> 16 (B free, merged) -> 0 (C free: the segment unsplit); its peak 16 MiB.
TEST(CachingAllocatorTrace, SplitReuseAndCoalesce) {
  CallRecorder calls;
  CachingAllocator a(AllocConf(), kNoDeviceLimit, int64_t{1} << 40, &calls);
  const BlockId A = a.malloc(6 * MiB);
  EXPECT_EQ(a.stats().inactive_split_bytes.current, 14 * MiB);
  const BlockId B = a.malloc(6 * MiB);
  EXPECT_EQ(a.stats().inactive_split_bytes.current, 8 * MiB);
  a.free(A);
  EXPECT_EQ(a.stats().inactive_split_bytes.current, 14 * MiB);
  const BlockId C = a.malloc(4 * MiB);
  EXPECT_EQ(a.stats().inactive_split_bytes.current, 10 * MiB);
  a.free(B);
  EXPECT_EQ(a.stats().inactive_split_bytes.current, 16 * MiB);
  a.free(C);
  EXPECT_EQ(calls.calls, (std::vector<std::string>{
                             "cudaMalloc(s0, 20971520)",
                             "Alloc(s0+0, 6291456, 6291456)",
                             "Alloc(s0+6291456, 6291456, 6291456)",
                             "Free(s0+0, 6291456)",
                             "Alloc(s0+0, 4194304, 4194304)",
                             "Free(s0+6291456, 6291456)",
                             "Free(s0+0, 4194304)",
                         }));
  const AllocatorStats& st = a.stats();
  EXPECT_EQ(st.inactive_split_bytes.current, 0);
  EXPECT_EQ(st.inactive_split.current, 0);
  EXPECT_EQ(st.inactive_split_bytes.peak, 16 * MiB);
  EXPECT_EQ(st.reserved_bytes.current, 20 * MiB);  // cached, not released
  EXPECT_EQ(st.allocated_bytes.current, 0);
  EXPECT_EQ(st.allocated_bytes.peak, 12 * MiB);
  // the segment is one free block again: a 20 MiB request takes it whole, no new segment
  a.malloc(20 * MiB);
  EXPECT_EQ(calls.calls.back(), "Alloc(s0+0, 20971520, 20971520)");
}

// A free block serves only its own stream: BlockComparatorSize orders by stream first and get_free_block
// takes a block only `if ((*it)->stream == p.stream())`; free_block returns a block to its allocation
// stream's pool. A (6 MiB, stream 1) takes a new 20 MiB segment s0 and is freed; B (6 MiB, stream 0)
// finds no free block of stream 0: a segment of its own, s1, 40 MiB reserved; C (6 MiB, stream 1)
// takes s0's free block again.
TEST(CachingAllocatorTrace, FreeBlocksServeOnlyTheirOwnStream) {
  CallRecorder calls;
  CachingAllocator a(AllocConf(), kNoDeviceLimit, int64_t{1} << 40, &calls);
  const BlockId A = a.malloc(6 * MiB, /*stream=*/1);
  a.free(A);
  a.malloc(6 * MiB, /*stream=*/0);
  a.malloc(6 * MiB, /*stream=*/1);
  EXPECT_EQ(calls.calls, (std::vector<std::string>{
                             "cudaMalloc(s0, 20971520)",
                             "Alloc(s0+0, 6291456, 6291456)",
                             "Free(s0+0, 6291456)",
                             "cudaMalloc(s1, 20971520)",
                             "Alloc(s1+0, 6291456, 6291456)",
                             "Alloc(s0+0, 6291456, 6291456)",
                         }));
  EXPECT_EQ(a.stats().reserved_bytes.current, 40 * MiB);
}

// max_split_size_mb:32 makes a block of 32 MiB or more oversize: never split, never given to a request
// under 32 MiB, and given to a larger one only if less than max_non_split_rounding (20 MiB) larger.
// X (60 MiB) takes a 60 MiB segment, unsplit, and is freed. Y (30 MiB, under 32) may not take it: a
// segment of its own (30 MiB). Z (35 MiB, rounded to 2 MiB: 36 MiB segment if new) may not either: 60
// >= 35 + 20: a segment of its own, the block the whole 36 MiB. With max_non_split_rounding_mb:30,
// 60 < 35 + 30: Z takes the 60 MiB block whole.
TEST(CachingAllocatorTrace, OversizeBlocksAreReusedOnlyNearTheirSize) {
  for (const bool wider : {false, true}) {
    CallRecorder calls;
    CachingAllocator a(conf(wider ? "max_split_size_mb:32,max_non_split_rounding_mb:30" : "max_split_size_mb:32"),
                       kNoDeviceLimit, int64_t{1} << 40, &calls);
    a.free(a.malloc(60 * MiB));
    a.malloc(30 * MiB);
    a.malloc(35 * MiB);
    std::vector<std::string> expected = {"cudaMalloc(s0, 62914560)", "Alloc(s0+0, 62914560, 62914560)",
                                         "Free(s0+0, 62914560)",     "cudaMalloc(s1, 31457280)",
                                         "Alloc(s1+0, 31457280, 31457280)"};
    if (wider) {
      expected.push_back("Alloc(s0+0, 62914560, 36700160)");
    } else {
      expected.push_back("cudaMalloc(s2, 37748736)");
      expected.push_back("Alloc(s2+0, 37748736, 36700160)");  // 35 MiB >= 32: its 1 MiB rest not split off
    }
    EXPECT_EQ(calls.calls, expected) << (wider ? "max_non_split_rounding_mb:30" : "default rounding");
    EXPECT_EQ(a.stats().inactive_split_bytes.peak, 0);
  }
}

// Out of memory at a device limit of 60 MiB: A (30 MiB) is cached after its free; B (40 MiB) cannot
// have a segment beside it (30 + 40 > 60) and max_split_size is unset, so release_cached_blocks frees
// every unsplit cached segment (A's) and the allocation is retried: num_alloc_retries 1, B in the slot
// A left. C (30 MiB) then fails even after a flush (nothing cached): a second retry, and out of memory.
TEST(CachingAllocatorTrace, RetryAfterCacheFlushThenOutOfMemory) {
  CallRecorder calls;
  CachingAllocator a(AllocConf(), 60 * MiB, 80 * MiB, &calls);
  a.free(a.malloc(30 * MiB));
  EXPECT_NE(a.malloc(40 * MiB), kOutOfMemory);
  EXPECT_EQ(a.stats().num_alloc_retries, 1);
  EXPECT_EQ(a.malloc(30 * MiB), kOutOfMemory);
  EXPECT_EQ(calls.calls, (std::vector<std::string>{
                             "cudaMalloc(s0, 31457280)",
                             "Alloc(s0+0, 31457280, 31457280)",
                             "Free(s0+0, 31457280)",
                             "cudaFree(s0, 31457280)",
                             "cudaMalloc(s0, 41943040)",
                             "Alloc(s0+0, 41943040, 41943040)",
                             "OutOfMemory(31457280)",
                         }));
  EXPECT_EQ(a.stats().num_alloc_retries, 2);
  EXPECT_EQ(a.stats().num_ooms, 1);
  EXPECT_EQ(a.stats().reserved_bytes.peak, 40 * MiB);  // A's 30 released before B's 40
}

// With max_split_size_mb:32 the first remedy is release_available_cached_blocks: at a limit of 100
// MiB, A (40 MiB) and B (50 MiB) are cached, oversize; C (30 MiB, under 32) may not use them and has
// no room (90 + 30 > 100). The smallest cached block of at least max(30, 32) MiB, A's, is freed and the
// allocation succeeds without a retry: num_alloc_retries stays 0, B stays cached.
TEST(CachingAllocatorTrace, OversizeCachedBlockFreedBeforeAFlush) {
  CallRecorder calls;
  CachingAllocator a(conf("max_split_size_mb:32"), 100 * MiB, 100 * MiB, &calls);
  const BlockId A = a.malloc(40 * MiB);
  const BlockId B = a.malloc(50 * MiB);
  a.free(A);
  a.free(B);
  a.malloc(30 * MiB);
  EXPECT_EQ(calls.calls, (std::vector<std::string>{
                             "cudaMalloc(s0, 41943040)",
                             "Alloc(s0+0, 41943040, 41943040)",
                             "cudaMalloc(s1, 52428800)",
                             "Alloc(s1+0, 52428800, 52428800)",
                             "Free(s0+0, 41943040)",
                             "Free(s1+0, 52428800)",
                             "cudaFree(s0, 41943040)",
                             "cudaMalloc(s0, 31457280)",
                             "Alloc(s0+0, 31457280, 31457280)",
                         }));
  EXPECT_EQ(a.stats().num_alloc_retries, 0);
  EXPECT_EQ(a.stats().reserved_bytes.current, 80 * MiB);
}

// expandable_segments:True: one segment for the large pool whose pages (20 MiB) are mapped as blocks
// need them. A (15 MiB) maps the first page and is split from it (5 MiB free at 15 MiB). B (15 MiB)
// finds no free block of 15 MiB; the free 5 MiB before the unmapped space plus one more page holds it:
// one page mapped at 20 MiB, merged (25 MiB free at 15 MiB), split (10 MiB left at 30 MiB). C the same:
// one page at 40 MiB. Each grows the one segment by one mapping: 60 MiB reserved, 45 MiB allocated, no
// cudaMalloc and no segment counted. (Without expandable segments each 15 MiB request, 10 MiB or more,
// takes a segment of its own rounded up to 2 MiB and unsplit (1 MiB left is not over 1 MiB): 48 MiB.)
TEST(CachingAllocatorTrace, ExpandableSegmentsGrowOneMappingEach) {
  CallRecorder calls;
  CachingAllocator a(conf("expandable_segments:True"), kNoDeviceLimit, 80 * MiB, &calls);
  a.malloc(15 * MiB);
  a.malloc(15 * MiB);
  a.malloc(15 * MiB);
  EXPECT_EQ(calls.calls, (std::vector<std::string>{
                             "Map(s0+0, 20971520)",
                             "Alloc(s0+0, 15728640, 15728640)",
                             "Map(s0+20971520, 20971520)",
                             "Alloc(s0+15728640, 15728640, 15728640)",
                             "Map(s0+41943040, 20971520)",
                             "Alloc(s0+31457280, 15728640, 15728640)",
                         }));
  EXPECT_EQ(a.stats().reserved_bytes.current, 60 * MiB);
  EXPECT_EQ(a.stats().allocated_bytes.current, 45 * MiB);
  EXPECT_EQ(a.stats().segment.current, 0);
  EXPECT_EQ(a.stats().inactive_split_bytes.peak, 0);  // not kept for expandable segments
  CachingAllocator plain{AllocConf()};
  for (int i = 0; i < 3; ++i) plain.malloc(15 * MiB);
  EXPECT_EQ(plain.stats().reserved_bytes.current, 48 * MiB);
  EXPECT_EQ(plain.stats().allocated_bytes.current, 48 * MiB);
}

// A cache flush under expandable segments unmaps free pages: at a limit of 21 MiB, A (15 MiB, large
// pool) maps 20 MiB and is freed (the page stays mapped, cached). S (600 KiB) needs the small pool's
// own segment and a 2 MiB page: 22 > 21, so the flush unmaps the large segment's free page (its whole
// address space unmapped, the segment released) and the retry maps the small page.
TEST(CachingAllocatorTrace, ExpandableFlushUnmapsFreePages) {
  CallRecorder calls;
  CachingAllocator a(conf("expandable_segments:True"), 21 * MiB, 24 * MiB, &calls);
  a.free(a.malloc(15 * MiB));
  EXPECT_NE(a.malloc(600 * 1024), kOutOfMemory);
  EXPECT_EQ(calls.calls, (std::vector<std::string>{
                             "Map(s0+0, 20971520)",
                             "Alloc(s0+0, 15728640, 15728640)",
                             "Free(s0+0, 15728640)",
                             "Unmap(s0+0, 20971520)",
                             "Map(s1+0, 2097152)",
                             "Alloc(s1+0, 614400, 614400)",
                         }));
  EXPECT_EQ(a.stats().num_alloc_retries, 1);
  EXPECT_EQ(a.stats().reserved_bytes.current, 2 * MiB);
  EXPECT_EQ(a.stats().reserved_bytes.peak, 20 * MiB);
}

// Property: at every event of a random trace, reserved >= allocated >= requested, under each mode.
TEST(CachingAllocatorProperty, ReservedCoversAllocatedAtEveryEvent) {
  for (const char* text : {"", "max_split_size_mb:40", "expandable_segments:True", "roundup_power2_divisions:4",
                           "max_split_size_mb:20,expandable_segments:True"}) {
    CachingAllocator a(conf(text), 3000 * MiB, 4000 * MiB);
    std::mt19937_64 random(7);
    std::vector<BlockId> live;
    for (int event = 0; event < 4000; ++event) {
      if (!live.empty() && random() % 5 < 2) {
        const size_t i = random() % live.size();
        a.free(live[i]);
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        // sizes from 1 B to 256 MiB, spread over the orders of magnitude
        const int64_t size = 1 + static_cast<int64_t>(random() % (int64_t{1} << (random() % 29)));
        const BlockId b = a.malloc(size);
        if (b != kOutOfMemory) live.push_back(b);
      }
      const AllocatorStats& st = a.stats();
      ASSERT_GE(st.reserved_bytes.current, st.allocated_bytes.current) << text << " event " << event;
      ASSERT_GE(st.allocated_bytes.current, st.requested_bytes.current) << text << " event " << event;
      ASSERT_LE(st.reserved_bytes.current, 3000 * MiB) << text << " event " << event;
    }
  }
}

// Property: with no frees, reserved equals allocated where every request fills what it reserves. Without
// expandable segments a request of 10 MiB or more that is a multiple of 2 MiB gets a segment of exactly
// its size (get_allocation_size) and nothing is split off (remaining 0); with expandable segments a
// large request that is a multiple of 20 MiB maps exactly its pages, and finds no free block before (the
// space after the last block is unmapped). So reserved == allocated at every event; a request off those
// sizes leaves a free remainder and reserved > allocated from then on.
TEST(CachingAllocatorProperty, NoFreesReservedEqualsAllocatedWhereRequestsFillSegments) {
  for (const bool expandable : {false, true}) {
    CachingAllocator a(conf(expandable ? "expandable_segments:True" : ""));
    std::mt19937_64 random(11);
    for (int event = 0; event < 500; ++event) {
      const int64_t unit = expandable ? 20 * MiB : 2 * MiB;
      const int64_t size = unit * (expandable ? 1 + static_cast<int64_t>(random() % 8) : 5 + static_cast<int64_t>(random() % 60));
      ASSERT_NE(a.malloc(size), kOutOfMemory);
      ASSERT_EQ(a.stats().reserved_bytes.current, a.stats().allocated_bytes.current) << "event " << event;
    }
    a.malloc(3 * MiB);  // 3 MiB: a 20 MiB segment (or page) split, 17 MiB left free
    EXPECT_EQ(a.stats().reserved_bytes.current - a.stats().allocated_bytes.current, 17 * MiB);
  }
}

}  // namespace
}  // namespace census::alloc
