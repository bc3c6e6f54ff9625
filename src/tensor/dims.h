// File: dims.h
// Dims: sizes or strides of a tensor, stored inline (no heap), as a census builds hundreds of tensors
// per layer and must stay in microseconds.
#pragma once

#include <array>
#include <cassert>
#include <cstdint>
#include <initializer_list>
#include <string>

namespace census {

class Dims {
 public:
  static constexpr int kMaxRank = 6;

  Dims() = default;
  Dims(std::initializer_list<int64_t> values) {
    assert(values.size() <= kMaxRank);
    for (int64_t v : values) data_[size_++] = v;
  }

  int size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int64_t operator[](int i) const { return data_[i]; }
  int64_t& operator[](int i) { return data_[i]; }
  int64_t back() const { return data_[size_ - 1]; }
  void push_back(int64_t v) {
    assert(size_ < kMaxRank);
    data_[size_++] = v;
  }
  void insert(int at, int64_t v) {
    assert(size_ < kMaxRank);
    for (int i = size_; i > at; --i) data_[i] = data_[i - 1];
    data_[at] = v;
    ++size_;
  }
  void erase(int at) {
    for (int i = at; i + 1 < size_; ++i) data_[i] = data_[i + 1];
    --size_;
  }
  const int64_t* begin() const { return data_.data(); }
  const int64_t* end() const { return data_.data() + size_; }

  int64_t product() const {
    int64_t n = 1;
    for (int i = 0; i < size_; ++i) n *= data_[i];
    return n;
  }

  bool operator==(const Dims& other) const {
    if (size_ != other.size_) return false;
    for (int i = 0; i < size_; ++i)
      if (data_[i] != other.data_[i]) return false;
    return true;
  }
  bool operator!=(const Dims& other) const { return !(*this == other); }

  std::string str() const {
    std::string out = "[";
    for (int i = 0; i < size_; ++i) {
      if (i) out += ", ";
      out += std::to_string(data_[i]);
    }
    return out + "]";
  }

 private:
  std::array<int64_t, kMaxRank> data_;  // only the first size_ are meaningful; not zeroed
  int size_ = 0;
};

// Row-major strides of a tensor of `sizes`.
inline Dims contiguous_strides(const Dims& sizes) {
  Dims strides = sizes;
  int64_t step = 1;
  for (int i = sizes.size() - 1; i >= 0; --i) {
    strides[i] = step;
    step *= sizes[i] > 1 ? sizes[i] : 1;
  }
  return strides;
}

// A dimension index as Python reads it: negative counts from the end.
inline int wrap_dim(int64_t dim, int rank) { return static_cast<int>(dim < 0 ? dim + rank : dim); }

}  // namespace census
