// Reading the paged KV cache's vectors back as float32, for the attention kernels: one
// (token, KV head) vector of d elements of the cache's dtype at a time, converted into a small
// buffer that the query heads sharing that KV head then read from L1.
#pragma once
#include <cstdint>

#include "core/dtype.h"
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

// The d elements of `pool` (of type t) from element `at` on, as floats: f32 vectors in place,
// others decoded into buf[0..d), fp8 ones times `scale`, the vector's scale.
inline const float* kv_row(const void* pool, DType t, int64_t at, int32_t d, float scale,
                           float* buf) {
  if (t == DType::F32) return static_cast<const float*>(pool) + at;
  int32_t c = 0;
  if (t == DType::BF16) {
    const uint16_t* src = static_cast<const uint16_t*>(pool) + at;
#if defined(__AVX512F__)
    for (; c + 16 <= d; c += 16) {
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + c));
      const __m512i w = _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16);
      _mm512_storeu_ps(buf + c, _mm512_castsi512_ps(w));
    }
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
#endif
    for (; c < d; ++c) buf[c] = e4m3_to_f32(src[c]) * scale;
  }
  return buf;
}

}  // namespace qmpi::cpu
