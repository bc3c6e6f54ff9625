// File: step_alloc.h
// The step's device allocations and frees handed, in order, to PyTorch's CUDA caching allocator
// (alloc/caching_allocator.h): what the allocator reserves beside what the step allocates.
//
// What the allocator sees (Note [What the allocator sees]):
//   - every storage the step counts (step/step_bytes.h), a later micro-batch's replayed pass as new
//     storages of its own, in the order the step makes and frees them, each on its stream (StepStream:
//     the compute stream, FSDP2's all-gather copy-in and reduce-scatter streams), a free block of one
//     stream's pool never handed to another's;
//   - in the steady state (every step after the first), the first step before it: the allocator's
//     cache is what that step left (Note [The first step warms the cache]);
//   - not the host tensors a CUDA run keeps off the device: AdamW's `step` counts, which
//     torch.optim.AdamW(foreach=False, capturable=False, fused=False) makes as torch.tensor(0.0) on the
//     CPU (the step oracle's real-CUDA run lists them as storages_off_device_by_op);
//   - under a composition (step/step_compose.h), each storage at its category's share of its bytes as
//     the composed peak counts it (ZeRO's shards, fp32 master weights and gradients), and the bytes the
//     composition holds during every forward and backward pass (ZeRO-3's gathered layers, the ring K/V
//     of context parallelism) as one block allocated when the pass starts and freed when it ends.
//
// What is reported, in PyTorch's terms: `allocated` counts blocks at their rounded sizes (its
// allocated_bytes: memory_allocated()); `requested` the bytes the step asked for, which the step's own
// peak counts (requested_peak equals the step's peak, or its composed peak, on the same events);
// `reserved` the segments and mapped pages (memory_reserved(), what nvidia-smi shows of PyTorch).
// largest_inactive_split is the most bytes at once in free blocks split off segments still in use
// (inactive_split_bytes' peak: cached, unusable for a larger request, unreleasable by empty_cache).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "alloc/caching_allocator.h"
#include "step/step_bytes.h"

namespace census {

struct StepAllocatorOptions {
  alloc::AllocConf conf;
  // The bytes the allocator may reserve (the device's memory less what is not PyTorch's: the CUDA
  // context, NCCL's buffers); kNoDeviceLimit: never out of memory.
  int64_t device_limit = alloc::kNoDeviceLimit;
  // The device's memory (an expandable segment reserves 1 1/8 of it as address space); 0: 1 TiB.
  int64_t device_total = 0;
  // Every storage on the device, the host ones too: as the step oracle's fake-tensor run counts them.
  bool every_storage_on_device = false;
};

struct StepAllocatorPhase {
  std::string name;
  int64_t reserved_peak = 0, allocated_peak = 0, requested_peak = 0;  // within the phase, its start included
  int64_t reserved_at_end = 0, allocated_at_end = 0;
};

struct StepAllocatorCensus {
  int64_t reserved_peak = 0;
  int64_t allocated_peak = 0;
  int64_t requested_peak = 0;
  int64_t largest_inactive_split = 0;
  int64_t num_alloc_retries = 0;
  int64_t segments_peak = 0;  // cudaMalloc'd segments alive at once
  int64_t device_allocs = 0;  // cudaMalloc and map calls
  int64_t device_frees = 0;
  bool limited = false;        // a device limit was given
  int64_t device_limit = 0;    // its bytes
  bool out_of_memory = false;  // an allocation failed after the cache was flushed
  std::string out_of_memory_phase;
  std::string_view out_of_memory_op;
  int64_t out_of_memory_request = 0;  // the bytes asked for
  std::string reserved_peak_phase;    // where the reserved bytes first reached their peak
  std::string_view reserved_peak_op;
  int64_t off_device_storages = 0;  // host tensors left out
  int64_t off_device_bytes = 0;
  std::vector<StepAllocatorPhase> phases;  // up to the out-of-memory's, where one fails
};

// The allocator over `bytes`' events as `weights` weigh them (identity: the simulated step), the
// composition's during-pass bytes one block a pass. `steady_state`: the step is a later one, whose
// optimizer states its setup finds made; the allocator starts from the cache the first step left
// (Note [The first step warms the cache], step_alloc.cpp), and reports the later step.
StepAllocatorCensus simulate_step_allocator(const StepBytes& bytes, const StepWeights& weights,
                                            const StepAllocatorOptions& options, bool steady_state = false);

}  // namespace census
