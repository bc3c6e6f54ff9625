// File: huge_pages.h
// An allocator for the buffers that grow to megabytes within one census (a step's event log, a layer's
// op records): a buffer of 2 MiB or more is mapped on its own, aligned to 2 MiB, and offered to the
// kernel for transparent huge pages; a smaller one comes from operator new.
//
// Note [Huge pages for large buffers]
// Each 4 KiB page a process touches first costs it a fault, about 4 us on the machines Census is
// timed on. A DeepSeek-V4-Pro step's log takes some 13,000 of them, three fifths of the step's faults and
// more time than its ops. Where transparent huge pages are enabled on request (the kernel's
// "madvise" mode, the default of most distributions), a 2 MiB page is one fault: that step ran in
// 0.13-0.21 s in place of 0.35-0.42 s, glibc's malloc told to do the same for every allocation
// (GLIBC_TUNABLES=glibc.malloc.hugetlb=1). The advice is only advice: where the kernel has no huge
// page to give, or none are enabled, the buffer has small pages as before, and every number is the
// same either way. Off Linux (the browser's build) every buffer comes from operator new.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace census {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;

inline void* allocate_large(size_t bytes) {
#if defined(__linux__)
  if (bytes >= kHugePageBytes) {
    const size_t size = (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
    // Mapped a huge page more than asked, then trimmed to the aligned span: a huge page must start on
    // a 2 MiB boundary.
    void* mapped = mmap(nullptr, size + kHugePageBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapped == MAP_FAILED) throw std::bad_alloc();
    const uintptr_t start = reinterpret_cast<uintptr_t>(mapped);
    const uintptr_t aligned = (start + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
    const uintptr_t end = start + size + kHugePageBytes;
    if (aligned > start) munmap(mapped, aligned - start);
    if (end > aligned + size) munmap(reinterpret_cast<void*>(aligned + size), end - (aligned + size));
    madvise(reinterpret_cast<void*>(aligned), size, MADV_HUGEPAGE);
    return reinterpret_cast<void*>(aligned);
  }
#endif
  return ::operator new(bytes);
}

inline void free_large(void* p, [[maybe_unused]] size_t bytes) noexcept {
#if defined(__linux__)
  if (bytes >= kHugePageBytes) {
    munmap(p, (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes);
    return;
  }
#endif
  ::operator delete(p);
}

// A std::allocator for such buffers (Note [Huge pages for large buffers]).
template <class T>
struct LargeBufferAllocator {
  using value_type = T;
  LargeBufferAllocator() = default;
  template <class U>
  LargeBufferAllocator(const LargeBufferAllocator<U>& /*other*/) noexcept {}
  T* allocate(size_t n) {
    if (n > SIZE_MAX / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(allocate_large(n * sizeof(T)));
  }
  void deallocate(T* p, size_t n) noexcept { free_large(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const LargeBufferAllocator<U>& /*other*/) const noexcept {
    return true;
  }
};

}  // namespace census
