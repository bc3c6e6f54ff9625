// File: small_vector.h
// SmallVector: a vector of at most N elements stored inline. A node's edges and gradients number one
// to three; keeping them off the heap keeps a census in microseconds. Only the elements in use are
// constructed, moved and destroyed: a node's eight slots of edges, gradients and input buffer would
// otherwise be made and unmade with every node and every gradient list.
#pragma once

#include <cassert>
#include <cstddef>
#include <initializer_list>
#include <new>
#include <utility>

namespace census {

template <class T, size_t N>
class SmallVector {
 public:
  SmallVector() = default;
  explicit SmallVector(size_t count) {
    assert(count <= N);
    for (; size_ < count; ++size_) new (slot(size_)) T();
  }
  SmallVector(std::initializer_list<T> values) {
    assert(values.size() <= N);
    for (const T& value : values) new (slot(size_++)) T(value);
  }
  SmallVector(const SmallVector& other) {
    for (; size_ < other.size_; ++size_) new (slot(size_)) T(other[size_]);
  }
  SmallVector(SmallVector&& other) noexcept {
    for (; size_ < other.size_; ++size_) new (slot(size_)) T(std::move(other[size_]));
    other.clear();
  }
  SmallVector& operator=(const SmallVector& other) {
    if (this != &other) {
      clear();
      for (; size_ < other.size_; ++size_) new (slot(size_)) T(other[size_]);
    }
    return *this;
  }
  SmallVector& operator=(SmallVector&& other) noexcept {
    if (this != &other) {
      clear();
      for (; size_ < other.size_; ++size_) new (slot(size_)) T(std::move(other[size_]));
      other.clear();
    }
    return *this;
  }
  ~SmallVector() { clear(); }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](size_t i) { return *slot(i); }
  const T& operator[](size_t i) const { return *slot(i); }
  T* begin() { return slot(0); }
  T* end() { return slot(size_); }
  const T* begin() const { return slot(0); }
  const T* end() const { return slot(size_); }
  T& back() { return *slot(size_ - 1); }
  void push_back(T value) {
    assert(size_ < N && "SmallVector capacity exceeded");
    new (slot(size_++)) T(std::move(value));
  }
  // Shrinking destroys the dropped elements first to last.
  void resize(size_t count) {
    assert(count <= N);
    for (size_t i = count; i < size_; ++i) slot(i)->~T();
    if (count < size_) size_ = count;
    for (; size_ < count; ++size_) new (slot(size_)) T();
  }
  // Destroyed from the last, as a vector's elements are.
  void clear() {
    while (size_ > 0) slot(--size_)->~T();
  }

 private:
  T* slot(size_t i) { return std::launder(reinterpret_cast<T*>(storage_) + i); }
  const T* slot(size_t i) const { return std::launder(reinterpret_cast<const T*>(storage_) + i); }

  alignas(T) unsigned char storage_[N * sizeof(T)];
  size_t size_ = 0;
};

}  // namespace census
