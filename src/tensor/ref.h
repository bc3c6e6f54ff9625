// File: ref.h
// Ref<T>: the reference-counted handle a census's tensors, storages and graph nodes hold each other
// by. A census runs on one thread (its Session is the thread's), so the counts need not be atomic:
// with GCC's standard library the handles use its single-threaded lock policy, which made a census a
// third faster; elsewhere they are std::shared_ptr.
#pragma once

#include <memory>

namespace census {

#if defined(__GLIBCXX__)
template <class T>
using Ref = std::__shared_ptr<T, __gnu_cxx::_S_single>;
template <class T>
using WeakRef = std::__weak_ptr<T, __gnu_cxx::_S_single>;
template <class T, class Allocator, class... Args>
Ref<T> allocate_ref(const Allocator& allocator, Args&&... args) {
  return std::__allocate_shared<T, __gnu_cxx::_S_single>(allocator, std::forward<Args>(args)...);
}
#else
template <class T>
using Ref = std::shared_ptr<T>;
template <class T>
using WeakRef = std::weak_ptr<T>;
template <class T, class Allocator, class... Args>
Ref<T> allocate_ref(const Allocator& allocator, Args&&... args) {
  return std::allocate_shared<T>(allocator, std::forward<Args>(args)...);
}
#endif

}  // namespace census
