// File: alloc_conf.h
// PYTORCH_CUDA_ALLOC_CONF as a user writes it ("expandable_segments:True,max_split_size_mb:128"), read
// by the rules PyTorch reads it with (c10/core/AllocatorConfig.cpp, AcceleratorAllocatorConfig::
// parseArgs, and c10/cuda/CUDAAllocatorConfig.cpp for the CUDA-only keys; torch 2.x): comma-separated
// `key:value` pairs, spaces ignored, a later key overriding an earlier one.
//
// What the simulator reads: max_split_size_mb, max_non_split_rounding_mb, roundup_power2_divisions,
// expandable_segments. Accepted and checked as PyTorch checks them, with no effect on the device pool
// Census simulates: garbage_collection_threshold (it acts only under set_per_process_memory_fraction,
// which a step does not call), release_lock_on_cudamalloc (locking), the pinned host-memory keys.
// Refused: backend:cudaMallocAsync (another allocator, the driver's), an unknown key, a malformed or
// out-of-range value, and a size PyTorch refuses (max_split_size_mb below its 20 MiB floor).
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "util/result.h"

namespace census::alloc {

inline constexpr int64_t kMiB = 1024 * 1024;
// "large" allocations may be packed in 20 MiB blocks (kLargeBuffer); also the floor of the two
// *_mb sizes and the default of max_non_split_rounding_mb.
inline constexpr int64_t kLargeBuffer = 20 * kMiB;
inline constexpr int64_t kNoSplitLimit = std::numeric_limits<int64_t>::max();
// roundup_power2_divisions' 16 intervals: [1 MiB, 2 MiB), [2, 4), ... up to [32 GiB, 64 GiB) and above.
inline constexpr size_t kRoundUpPowerOfTwoIntervals = 16;

struct AllocConf {
  // Blocks of this size or more are never split (kNoSplitLimit: every block may be).
  int64_t max_split_size = kNoSplitLimit;
  // An oversize block serves a request only if it is less than this much larger.
  int64_t max_non_split_rounding_size = kLargeBuffer;
  // Divisions between powers of two that requests round up to, by interval (0: none, 512 B rounding).
  std::array<int64_t, kRoundUpPowerOfTwoIntervals> roundup_power2_divisions{};
  bool expandable_segments = false;
  double garbage_collection_threshold = 0;  // read and checked; no effect on the simulation
  std::string text;  // as the user wrote it

  // roundup_power2_divisions(size): the divisions of the interval `size` falls in (asked at every
  // allocation: inline),
  //   index = floor(log2(size)) - 20, from 0 (below 2 MiB) to 15 (32 GiB and above)
  int64_t divisions_for(int64_t size) const {
    const int log_size = std::bit_width(static_cast<uint64_t>(size)) - 1;
    const int index = std::clamp(log_size - 20, 0, static_cast<int>(kRoundUpPowerOfTwoIntervals) - 1);
    return roundup_power2_divisions[static_cast<size_t>(index)];
  }
};

// Read `text` as PyTorch reads PYTORCH_CUDA_ALLOC_CONF (empty: the defaults). Refused: one line naming
// the key and what is wrong, under the field "--alloc-conf".
Result<AllocConf> parse_alloc_conf(std::string_view text);

}  // namespace census::alloc
