// File: small_vector.h
// SmallVector: a vector of at most N elements stored inline. A node's edges and gradients number one
// to three; keeping them off the heap keeps a census in microseconds.
#pragma once

#include <array>
#include <cassert>
#include <cstddef>
#include <initializer_list>
#include <utility>

namespace census {

template <class T, size_t N>
class SmallVector {
 public:
  SmallVector() = default;
  explicit SmallVector(size_t count) : size_(count) { assert(count <= N); }
  SmallVector(std::initializer_list<T> values) {
    assert(values.size() <= N);
    for (const T& value : values) items_[size_++] = value;
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](size_t i) { return items_[i]; }
  const T& operator[](size_t i) const { return items_[i]; }
  T* begin() { return items_.data(); }
  T* end() { return items_.data() + size_; }
  const T* begin() const { return items_.data(); }
  const T* end() const { return items_.data() + size_; }
  T& back() { return items_[size_ - 1]; }
  void push_back(T value) {
    assert(size_ < N && "SmallVector capacity exceeded");
    items_[size_++] = std::move(value);
  }
  void resize(size_t count) {
    assert(count <= N);
    for (size_t i = count; i < size_; ++i) items_[i] = T();
    size_ = count;
  }

 private:
  std::array<T, N> items_{};
  size_t size_ = 0;
};

}  // namespace census
