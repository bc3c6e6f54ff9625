// File: recycled.h
// Spare buffers for vectors that grow to megabytes and die with the census that filled them, for the
// next census of the same kind on any thread.
//
// Note [Recycled buffers]: a step's event log (step/step_bytes.h) holds tens of thousands of events
// and storages. Grown afresh for every step, each doubling takes new memory the kernel pages in one
// fault at a time, and the freed buffer goes back to the system. In a search that simulates step
// after step (census plan), those faults were over half of the process's time: a Qwen3-Next-80B plan
// on 16,384 GPUs took 149,000, a third of them in the log's push_backs. Run one after another, a
// Llama-3.1-8B step took 3.3 ms where its ops take 1.25. A buffer handed back here keeps its pages for
// the next step. The spares are shared by the threads (a search's worker threads end with each batch
// of jobs, their thread-locals with them), at most one a census running at once, each emptied.
#pragma once

#include <algorithm>
#include <cstddef>
#include <mutex>
#include <utility>
#include <vector>

#include "util/huge_pages.h"

namespace census {

// A vector that grows to megabytes: its buffers from LargeBufferAllocator (Note [Huge pages for large
// buffers]).
template <class T>
using LargeVector = std::vector<T, LargeBufferAllocator<T>>;

// The spare vectors of T kept for buffers of `Owner` (a class, so two owners of the same element type
// keep their own).
template <class Owner, class T>
class SpareVectors {
 public:
  static SpareVectors& get() {
    static SpareVectors spares;
    return spares;
  }
  // An empty vector holding the largest spare buffer, if any.
  LargeVector<T> take() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (spares_.empty()) return {};
    LargeVector<T> v = std::move(spares_.back());
    spares_.pop_back();
    return v;
  }
  // `v` emptied and kept, the spares in order of capacity; past kKept, the smallest is let go.
  void give(LargeVector<T>& v) {
    if (v.capacity() == 0) return;
    v.clear();
    std::lock_guard<std::mutex> lock(mutex_);
    auto at = std::lower_bound(spares_.begin(), spares_.end(), v.capacity(),
                               [](const LargeVector<T>& s, size_t capacity) { return s.capacity() < capacity; });
    spares_.insert(at, std::move(v));
    if (spares_.size() > kKept) spares_.erase(spares_.begin());
  }

 private:
  static constexpr size_t kKept = 16;  // more than the censuses a machine runs at once
  std::mutex mutex_;
  std::vector<LargeVector<T>> spares_;
};

// An empty vector holding the largest buffer recycled for `Owner`'s vectors of T, if any.
template <class Owner, class T>
LargeVector<T> reused_vector() {
  return SpareVectors<Owner, T>::get().take();
}

// `v` emptied, its buffer kept for a later reused_vector.
template <class Owner, class T>
void recycle_vector(LargeVector<T>& v) {
  SpareVectors<Owner, T>::get().give(v);
}

}  // namespace census
