// Reading the paged KV cache's vectors back for the attention kernels: one (token, KV head)
// vector of d elements of the cache's dtype at a time, as float32 (the exact path's prefill rows)
// or as bf16 (the decode paths), converted into a small buffer that the query heads sharing that KV
// head then read from L1.
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "kernels/cpu/e4m3_simd.h"
#include "kernels/cpu/vec.h"
#include "kernels/cpu/x86.h"

namespace qmpi::cpu {

#if defined(__AVX512F__)
// 16 e4m3 bytes as floats: a normal e4m3 is a float with exponent e - 7 + 127 and the same 3
// top mantissa bits; a subnormal (e = 0) is m * 2^-9, which integer arithmetic gets exactly.
inline __m512 e4m3x16_to_ps(__m128i bytes) {
  const __m512i x = _mm512_cvtepu8_epi32(bytes);
  const __m512i mag = _mm512_and_si512(x, _mm512_set1_epi32(0x7f));
  const __m512i sign = _mm512_slli_epi32(_mm512_and_si512(x, _mm512_set1_epi32(0x80)), 24);
  const __m512i normal = _mm512_add_epi32(_mm512_slli_epi32(mag, 20), _mm512_set1_epi32(120 << 23));
  const __m512 sub = _mm512_mul_ps(_mm512_cvtepi32_ps(mag), _mm512_set1_ps(1.0f / 512.0f));
  const __mmask16 is_sub = _mm512_cmplt_epi32_mask(mag, _mm512_set1_epi32(8));
  const __m512 v = _mm512_mask_mov_ps(_mm512_castsi512_ps(normal), is_sub, sub);
  return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(v), sign));
}
#endif

#if defined(__AVX512BW__)
// 32 e4m3 bytes as bf16, exactly (bf16 has e4m3's exponent range and more mantissa): a normal
// code moves its exponent and mantissa up into bf16's fields; the eight subnormals m * 2^-9,
// normal numbers in bf16, come from a table.
inline __m512i e4m3x32_to_bf16(__m256i bytes) {
  const __m512i x = _mm512_cvtepu8_epi16(bytes);
  const __m512i mag = _mm512_and_si512(x, _mm512_set1_epi16(0x7f));
  const __m512i sign = _mm512_slli_epi16(_mm512_and_si512(x, _mm512_set1_epi16(0x80)), 8);
  const __m512i normal = _mm512_add_epi16(_mm512_slli_epi16(mag, 4), _mm512_set1_epi16(120 << 7));
  // bf16 of 0, 2^-9, 2^-8, 1.5 * 2^-8, 2^-7, 1.25 * 2^-7, 1.5 * 2^-7, 1.75 * 2^-7 (index m).
  const __m512i table =
      _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                       0x3c60, 0x3c40, 0x3c20, 0x3c00, 0x3bc0, 0x3b80, 0x3b00, 0);
  const __mmask32 is_sub = _mm512_cmplt_epu16_mask(mag, _mm512_set1_epi16(8));
  const __m512i v = _mm512_mask_mov_epi16(normal, is_sub, _mm512_permutexvar_epi16(mag, table));
  return _mm512_or_si512(v, sign);
}
#elif defined(__AVX2__)
// 16 e4m3 bytes as bf16, exactly, as above; AVX2 has no 16-bit permute, so the subnormals' bf16
// bytes come from two byte shuffles indexed by m.
inline __m256i e4m3x16_to_bf16(__m128i bytes) {
  const __m256i x = _mm256_cvtepu8_epi16(bytes);
  const __m256i mag = _mm256_and_si256(x, _mm256_set1_epi16(0x7f));
  const __m256i sign = _mm256_slli_epi16(_mm256_and_si256(x, _mm256_set1_epi16(0x80)), 8);
  const __m256i normal = _mm256_add_epi16(_mm256_slli_epi16(mag, 4), _mm256_set1_epi16(120 << 7));
  // Low and high bytes of the bf16 of m * 2^-9, m < 8 (index m; the high byte of each 16-bit
  // lane of mag is 0 and picks entry 0, a 0 byte).
  const __m256i lo_bytes =
      _mm256_setr_epi8(0, 0, char(0x80), char(0xc0), 0, 0x20, 0x40, 0x60, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                       0, char(0x80), char(0xc0), 0, 0x20, 0x40, 0x60, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m256i hi_bytes =
      _mm256_setr_epi8(0, 0x3b, 0x3b, 0x3b, 0x3c, 0x3c, 0x3c, 0x3c, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x3b,
                       0x3b, 0x3b, 0x3c, 0x3c, 0x3c, 0x3c, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m256i sub = _mm256_or_si256(_mm256_shuffle_epi8(lo_bytes, mag),
                                      _mm256_slli_epi16(_mm256_shuffle_epi8(hi_bytes, mag), 8));
  const __m256i is_sub = _mm256_cmpgt_epi16(_mm256_set1_epi16(8), mag);
  return _mm256_or_si256(_mm256_blendv_epi8(normal, sub, is_sub), sign);
}
#endif

// The d elements of `pool` (of type t) from element `at` on, as floats: f32 vectors in place,
// others decoded into buf[0..d), fp8 ones times `scale`, the vector's scale.
inline const float* kv_row(const void* pool, DType t, int64_t at, int32_t d, float scale,
                           float* buf) {
  if (t == DType::F32) return static_cast<const float*>(pool) + at;
  int32_t c = 0;
  if (t == DType::BF16) {
    const uint16_t* src = static_cast<const uint16_t*>(pool) + at;
#if defined(QMPI_CPU_VEC)
    for (; c + vec::kLanes <= d; c += vec::kLanes) vec::store(buf + c, vec::load_bf16(src + c));
#endif
    for (; c < d; ++c) buf[c] = bf16_to_f32(src[c]);
  } else {
    const uint8_t* src = static_cast<const uint8_t*>(pool) + at;
#if defined(__AVX512F__)
    const __m512 s = _mm512_set1_ps(scale);
    for (; c + 16 <= d; c += 16) {
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + c));
      _mm512_storeu_ps(buf + c, _mm512_mul_ps(e4m3x16_to_ps(b), s));
    }
#elif defined(QMPI_CPU_VEC)
    // e4m3_load's values are the codes' times 2^-8, exactly; times scale * 2^8 they round once,
    // as e4m3_to_f32(code) * scale does (one call of which per element made an fp8 32k layer
    // 14x slower than a bf16 one on AVX2).
    const vec::F s = vec::splat(scale * 256.0f);
    for (; c + 2 * vec::kLanes <= d; c += 2 * vec::kLanes) {
      const E4m3Pair v = e4m3_load(src + c);
      vec::store(buf + c, vec::mul(v.lo, s));
      vec::store(buf + c + vec::kLanes, vec::mul(v.hi, s));
    }
#endif
    for (; c < d; ++c) buf[c] = e4m3_to_f32(src[c]) * scale;
  }
  return buf;
}

// The d elements of a bf16 or fp8 `pool` from element `at` on, as bf16: bf16 vectors in place,
// fp8 codes converted exactly into buf[0..d) (the vector's scale is left to the caller).
inline const uint16_t* kv_row_bf16(const void* pool, DType t, int64_t at, int32_t d,
                                   uint16_t* buf) {
  if (t == DType::BF16) return static_cast<const uint16_t*>(pool) + at;
  const uint8_t* src = static_cast<const uint8_t*>(pool) + at;
  int32_t c = 0;
#if defined(__AVX512BW__)
  for (; c + 32 <= d; c += 32)
    _mm512_storeu_si512(
        buf + c, e4m3x32_to_bf16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + c))));
#elif defined(__AVX2__)
  for (; c + 16 <= d; c += 16)
    _mm256_storeu_si256(
        reinterpret_cast<__m256i*>(buf + c),
        e4m3x16_to_bf16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + c))));
#endif
  for (; c < d; ++c) buf[c] = f32_to_bf16(e4m3_to_f32(src[c]));
  return buf;
}

}  // namespace qmpi::cpu
