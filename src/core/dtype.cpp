#include "core/dtype.h"

#include <array>
#include <cmath>
#include <limits>
#include <utility>

namespace qmpi {
namespace {
struct DTypeRow {
  DType type;
  std::string_view name;
  size_t size;
};
constexpr std::array<DTypeRow, 15> kTypes{{
    {DType::F32, "F32", 4},
    {DType::F16, "F16", 2},
    {DType::BF16, "BF16", 2},
    {DType::F64, "F64", 8},
    {DType::I64, "I64", 8},
    {DType::I32, "I32", 4},
    {DType::I16, "I16", 2},
    {DType::I8, "I8", 1},
    {DType::U8, "U8", 1},
    {DType::U16, "U16", 2},
    {DType::U32, "U32", 4},
    {DType::U64, "U64", 8},
    {DType::BOOL, "BOOL", 1},
    {DType::F8_E4M3, "F8_E4M3", 1},
    {DType::F8_E5M2, "F8_E5M2", 1},
}};
}  // namespace

size_t dtype_size(DType t) {
  for (const auto& r : kTypes)
    if (r.type == t) return r.size;
  return 0;
}

std::string_view dtype_name(DType t) {
  for (const auto& r : kTypes)
    if (r.type == t) return r.name;
  return "?";
}

std::optional<DType> parse_dtype(std::string_view s) {
  for (const auto& r : kTypes)
    if (r.name == s) return r.type;
  return std::nullopt;
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t u;
  if (exp == 0) {
    if (mant == 0) {
      u = sign;
    } else {  // subnormal: renormalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ff;
      u = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 0x1f) {
    u = sign | 0x7f800000u | (mant << 13);
  } else {
    u = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t f32_to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000;
  int32_t exp = int32_t((u >> 23) & 0xff) - 127 + 15;
  uint32_t mant = u & 0x7fffff;
  if (((u >> 23) & 0xff) == 0xff) return uint16_t(sign | 0x7c00 | (mant ? 0x200 : 0));
  if (exp >= 0x1f) return uint16_t(sign | 0x7c00);
  if (exp <= 0) {
    if (exp < -10) return uint16_t(sign);
    mant |= 0x800000;
    uint32_t shift = uint32_t(14 - exp);
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return uint16_t(sign | half);
  }
  uint32_t half = sign | (uint32_t(exp) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) ++half;
  return uint16_t(half);
}

uint8_t f32_to_e4m3(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const auto sign = uint8_t((u >> 24) & 0x80);
  u &= 0x7fffffffu;
  if (u > 0x7f800000u) return sign | 0x7f;
  if (std::fabs(f) >= kE4m3Max) return sign | 0x7e;
  if (u >= 0x3c800000u) {  // >= 2^-6, a normal e4m3: keep 3 of float's 23 mantissa bits
    const uint32_t r = (u + 0x7ffffu + ((u >> 20) & 1u)) >> 20;
    return sign | uint8_t(r - ((127u - 7u) << 3));
  }
  // Subnormal steps of 2^-9; f * 512 is exact and rint rounds half to even.
  return sign | uint8_t(std::rint(std::fabs(f) * 512.0f));
}

float e4m3_to_f32(uint8_t b) {
  const int e = (b >> 3) & 0xf, m = b & 7;
  float v;
  if (e == 15 && m == 7)
    v = std::numeric_limits<float>::quiet_NaN();
  else if (e == 0)
    v = std::ldexp(float(m), -9);
  else
    v = std::ldexp(1.0f + float(m) / 8.0f, e - 7);
  return (b & 0x80) ? -v : v;
}

}  // namespace qmpi
