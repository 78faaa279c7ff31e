// Element types as they appear in checkpoints, and the bf16/f16 <-> f32 conversions the
// kernels and loaders share.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace qmpi {

enum class DType : uint8_t {
  F32,
  F16,
  BF16,
  F64,
  I64,
  I32,
  I16,
  I8,
  U8,
  U16,
  U32,
  U64,
  BOOL,
  F8_E4M3,
  F8_E5M2
};

size_t dtype_size(DType t);
// Spelling used by safetensors headers ("BF16", "F32", ...).
std::string_view dtype_name(DType t);
std::optional<DType> parse_dtype(std::string_view safetensors_name);
// Types the forward pass can compute from (weights stay in this type in memory).
inline bool is_float_weight(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

inline float bf16_to_f32(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Round to nearest even, NaN kept quiet: the same rounding torch uses when casting to bf16.
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

// OCP fp8 e4m3 ("e4m3fn": bias 7, no infinities, 0x7f/0xff NaN, largest finite 448).
// Encoding rounds to nearest even and saturates: anything at or beyond +-448, infinities
// included, becomes +-448; NaN stays NaN (as CUDA's __NV_SATFINITE conversion).
inline constexpr float kE4m3Max = 448.0f;
uint8_t f32_to_e4m3(float f);
float e4m3_to_f32(uint8_t b);

}  // namespace qmpi
