// File: dtype.h
// The element types a census meets: bf16 activations and parameters, fp32 islands (norm upcasts,
// softmax statistics, the loss), integer indices and boolean masks; complex64 for Llama 4's rotary,
// which multiplies queries and keys as complex numbers; uint8 for 8-bit optimizer states; int8 for the
// mask TRL's chunked loss sorts its tokens by; float64, float8_e4m3fn and float8_e5m2 for torchao's FP8
// training (its scales' arithmetic, and the casts its matrix products take).
#pragma once

#include <cstdint>
#include <string_view>

namespace census {

enum class DType : uint8_t {
  kBool, kInt32, kInt64, kBFloat16, kFloat32, kComplex64, kUInt8, kInt8, kFloat64, kFloat8E4M3, kFloat8E5M2,
};

constexpr int64_t element_size(DType dtype) {
  switch (dtype) {
    case DType::kBool: return 1;
    case DType::kUInt8: return 1;
    case DType::kInt8: return 1;
    case DType::kFloat8E4M3: return 1;
    case DType::kFloat8E5M2: return 1;
    case DType::kBFloat16: return 2;
    case DType::kInt32: return 4;
    case DType::kFloat32: return 4;
    case DType::kInt64: return 8;
    case DType::kComplex64: return 8;
    case DType::kFloat64: return 8;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kBool: return "bool";
    case DType::kBFloat16: return "bfloat16";
    case DType::kInt32: return "int32";
    case DType::kFloat32: return "float32";
    case DType::kInt64: return "int64";
    case DType::kComplex64: return "complex64";
    case DType::kUInt8: return "uint8";
    case DType::kInt8: return "int8";
    case DType::kFloat64: return "float64";
    case DType::kFloat8E4M3: return "float8_e4m3fn";
    case DType::kFloat8E5M2: return "float8_e5m2";
  }
  return "?";
}

constexpr bool is_floating(DType dtype) {
  return dtype == DType::kBFloat16 || dtype == DType::kFloat32 || dtype == DType::kFloat64;
}

// PyTorch's type promotion between two tensors of these types: complex over real, the wider float wins.
constexpr DType promote(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::kComplex64 || b == DType::kComplex64) return DType::kComplex64;
  if (a == DType::kFloat64 || b == DType::kFloat64) return DType::kFloat64;
  if (a == DType::kFloat32 || b == DType::kFloat32) return DType::kFloat32;
  if (a == DType::kBFloat16 || b == DType::kBFloat16) return DType::kBFloat16;
  if (a == DType::kInt64 || b == DType::kInt64) return DType::kInt64;
  return DType::kInt32;
}

}  // namespace census
