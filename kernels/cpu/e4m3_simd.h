// e4m3 codes decoded in AVX-512 (or AVX2) registers, exactly (subnormals included), for the FP8
// GEMV (matmul_fp8.cpp) and the bf16 tiles of the blocked GEMM (matmul_blocked.cpp). Every value
// comes out times 2^-8; the callers fold 2^8 into the block scale. e4m3_load(p) decodes the
// 2 * vec::kLanes codes at p, e4m3_load_first(p, n) the first n of them (zeros after).
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "kernels/cpu/vec.h"
#include "kernels/cpu/x86.h"

namespace qmpi::cpu {

#if defined(__AVX512F__)

// 32 e4m3 codes as two vectors of 16 float32 values times 2^-8, in order. VPERMB (or a widening
// and a shift, without AVX512-VBMI) puts each code in the high byte of a 16-bit lane, the low
// byte zero; shifting right arithmetically by one leaves the sign in bit 15 (and a copy in bit
// 14, cleared) and the 7 exponent+mantissa bits in f16's bits 7..13, which reads as the code's
// value times 2^-8 (f16's exponent bias is 15, e4m3's 7), subnormals included; VCVTPH2PS widens
// it exactly.
struct E4m3Pair {
  __m512 lo, hi;
};
inline E4m3Pair e4m3_decode32(__m256i codes) {
#if defined(__AVX512VBMI__)
  const __m512i idx =
      _mm512_set_epi8(31, 0, 30, 0, 29, 0, 28, 0, 27, 0, 26, 0, 25, 0, 24, 0, 23, 0, 22, 0, 21, 0,
                      20, 0, 19, 0, 18, 0, 17, 0, 16, 0, 15, 0, 14, 0, 13, 0, 12, 0, 11, 0, 10, 0,
                      9, 0, 8, 0, 7, 0, 6, 0, 5, 0, 4, 0, 3, 0, 2, 0, 1, 0, 0, 0);
  const __m512i high = _mm512_maskz_permutexvar_epi8(__mmask64(0xaaaaaaaaaaaaaaaaull), idx,
                                                     _mm512_castsi256_si512(codes));
#else
  const __m512i high = _mm512_slli_epi16(_mm512_cvtepu8_epi16(codes), 8);
#endif
  const __m512i h =
      _mm512_and_si512(_mm512_srai_epi16(high, 1), _mm512_set1_epi16(int16_t(0xbfff)));
  return {_mm512_cvtph_ps(_mm512_castsi512_si256(h)),
          _mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1))};
}
inline E4m3Pair e4m3_load(const uint8_t* p) {
  return e4m3_decode32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline E4m3Pair e4m3_load_first(const uint8_t* p, int n) {
  return e4m3_decode32(_mm256_maskz_loadu_epi8(__mmask32((1ull << n) - 1), p));
}

#elif defined(QMPI_CPU_VEC)

// AVX2: the same decode, 16 codes into two vectors of 8.
struct E4m3Pair {
  __m256 lo, hi;
};
inline E4m3Pair e4m3_decode16(__m128i codes) {
  const __m256i high = _mm256_slli_epi16(_mm256_cvtepu8_epi16(codes), 8);
  const __m256i h =
      _mm256_and_si256(_mm256_srai_epi16(high, 1), _mm256_set1_epi16(int16_t(0xbfff)));
  return {_mm256_cvtph_ps(_mm256_castsi256_si128(h)),
          _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1))};
}
inline E4m3Pair e4m3_load(const uint8_t* p) {
  return e4m3_decode16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline E4m3Pair e4m3_load_first(const uint8_t* p, int n) {
  alignas(16) uint8_t buf[16];
  return e4m3_decode16(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(vec::whole_or_padded(p, n, buf))));
}

// The GEMV's decode on AVX2: 8 codes sign-extended to 32 bits and shifted left by 20 put the sign
// in bit 31 (with copies in bits 27..30, masked off) and the 7 exponent+mantissa bits in
// float32's bits 20..26, which reads as the code's value times 2^-120 (float32's exponent bias
// is 127, e4m3's 7); subnormal codes become float32 subnormals, exact as FMA inputs. Three
// simple operations per 8 codes: the F16C route above takes 1.6x the time per code in the GEMV's
// loop on this host's Zen 4 (its shifts, widening and VCVTPH2PS share two pipes).
inline constexpr int kE4m3RawExponent = 120;
inline __m256 e4m3_decode8_raw(__m128i codes) {
  return _mm256_castsi256_ps(_mm256_and_si256(_mm256_slli_epi32(_mm256_cvtepi8_epi32(codes), 20),
                                              _mm256_set1_epi32(int32_t(0x87f00000u))));
}
inline E4m3Pair e4m3_load_raw(const uint8_t* p) {
  return {e4m3_decode8_raw(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))),
          e4m3_decode8_raw(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8)))};
}
inline E4m3Pair e4m3_load_raw_first(const uint8_t* p, int n) {
  alignas(16) uint8_t buf[16];
  return e4m3_load_raw(vec::whole_or_padded(p, n, buf));
}

#endif

#if defined(__AVX512BF16__)
#if defined(__AVX512VBMI__)
// The bf16 bits of the 128 e4m3 magnitudes times 2^-8, as their low bytes and high bytes: VPERMI2B
// looks a byte up among 128 by an index's low 7 bits, so two lookups decode 64 codes.
struct E4m3Bf16Bytes {
  __m512i lo[2], hi[2];
};
inline const E4m3Bf16Bytes& e4m3_bf16_bytes() {
  static const E4m3Bf16Bytes t = [] {
    alignas(64) uint8_t lo[128], hi[128];
    for (int m = 0; m < 128; ++m) {
      const uint16_t b = f32_to_bf16(e4m3_to_f32(uint8_t(m)) * 0x1p-8f);
      lo[m] = uint8_t(b), hi[m] = uint8_t(b >> 8);
    }
    return E4m3Bf16Bytes{{_mm512_load_si512(lo), _mm512_load_si512(lo + 64)},
                         {_mm512_load_si512(hi), _mm512_load_si512(hi + 64)}};
  }();
  return t;
}

// 64 codes as two vectors of 32 bf16 words (the values times 2^-8, exact): the two lookups, the
// sign OR-ed into the high byte, the low and high bytes interleaved. Interleaving works within
// 16-byte lanes, so the first vector holds codes 0-7, 16-23, 32-39, 48-55 and the second the
// rest (kE4m3Bf16Interleaved); the tables sit in registers for a loop's length.
inline constexpr bool kE4m3Bf16Interleaved = true;
struct E4m3Bf16Decoder {
  const E4m3Bf16Bytes& t = e4m3_bf16_bytes();
  const __m512i lo0 = t.lo[0], lo1 = t.lo[1], hi0 = t.hi[0], hi1 = t.hi[1];
  const __m512i sign = _mm512_set1_epi8(int8_t(0x80));
  void operator()(__m512i c, __m512i& first, __m512i& second) const {
    const __m512i lo = _mm512_permutex2var_epi8(lo0, c, lo1);
    const __m512i hi = _mm512_ternarylogic_epi32(_mm512_permutex2var_epi8(hi0, c, hi1), c, sign,
                                                 0xf8);  // high byte | (code & 0x80)
    first = _mm512_unpacklo_epi8(lo, hi);
    second = _mm512_unpackhi_epi8(lo, hi);
  }
};
#else
// Without VPERMI2B: e4m3_decode32's float32 values narrowed (exact: at most 4 significant bits),
// codes 0-31 in the first vector and 32-63 in the second.
inline constexpr bool kE4m3Bf16Interleaved = false;
struct E4m3Bf16Decoder {
  void operator()(__m512i c, __m512i& first, __m512i& second) const {
    const E4m3Pair a = e4m3_decode32(_mm512_castsi512_si256(c));
    const E4m3Pair b = e4m3_decode32(_mm512_extracti64x4_epi64(c, 1));
    first = __m512i(_mm512_cvtne2ps_pbh(a.hi, a.lo));
    second = __m512i(_mm512_cvtne2ps_pbh(b.hi, b.lo));
  }
};
#endif
#endif

// count codes as bf16 bits times 2^-8: a value of at most 4 significant bits is exact in bf16,
// and none is subnormal there (the smallest, 2^-17, is far above bf16's 2^-126), so VDPBF16PS,
// which flushes subnormal inputs, sees every weight. A loop over many short rows makes one
// E4m3ToBf16 and keeps its tables in registers; e4m3_to_bf16 is one row's.
struct E4m3ToBf16 {
#if defined(__AVX512BF16__)
  // 64 codes at a time; with VBMI a byte shuffle first orders them so that the decoder's
  // interleaving leaves codes 0..31 in the first vector and 32..63 in the second (a third of the
  // work of the f16 route).
  alignas(64) static constexpr uint8_t kOrder[64] = {
      0,  1,  2,  3,  4,  5,  6,  7,  32, 33, 34, 35, 36, 37, 38, 39, 8,  9,  10, 11, 12, 13,
      14, 15, 40, 41, 42, 43, 44, 45, 46, 47, 16, 17, 18, 19, 20, 21, 22, 23, 48, 49, 50, 51,
      52, 53, 54, 55, 24, 25, 26, 27, 28, 29, 30, 31, 56, 57, 58, 59, 60, 61, 62, 63};
  const __m512i order = _mm512_load_si512(kOrder);
  const E4m3Bf16Decoder decode{};
  void operator()(const uint8_t* q, int64_t count, uint16_t* dst) const {
    for (int64_t k = 0; k < count; k += 64) {
      const int64_t left = count - k;
      const __mmask64 m = left >= 64 ? ~__mmask64(0) : (__mmask64(1) << left) - 1;
      __m512i c = _mm512_maskz_loadu_epi8(m, q + k);
      if constexpr (kE4m3Bf16Interleaved) c = _mm512_permutexvar_epi8(order, c);
      __m512i first, second;
      decode(c, first, second);
      _mm512_mask_storeu_epi16(dst + k, __mmask32(m), first);
      _mm512_mask_storeu_epi16(dst + k + 32, __mmask32(m >> 32), second);
    }
  }
#else
  void operator()(const uint8_t* q, int64_t count, uint16_t* dst) const;
#endif
};
inline void e4m3_to_bf16(const uint8_t* q, int64_t count, uint16_t* dst) {
  E4m3ToBf16{}(q, count, dst);
}
#if !defined(__AVX512BF16__)
inline void E4m3ToBf16::operator()(const uint8_t* q, int64_t count, uint16_t* dst) const {
  int64_t k = 0;
#if defined(__AVX512F__)
  // The float32 values' high halves are their exact bf16 bits.
  for (; k + 32 <= count; k += 32) {
    const E4m3Pair v = e4m3_load(q + k);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + k),
                        _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(v.lo), 16)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + k + 16),
                        _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(v.hi), 16)));
  }
#elif defined(QMPI_CPU_VEC)
  // The float32 values' high halves are their exact bf16 bits; VPACKUSDW packs within 16-byte
  // lanes, so the 64-bit quarters come out as codes 0-3, 8-11, 4-7, 12-15 and are put back in
  // order.
  for (; k + 16 <= count; k += 16) {
    const E4m3Pair v = e4m3_load(q + k);
    const __m256i packed = _mm256_packus_epi32(_mm256_srli_epi32(_mm256_castps_si256(v.lo), 16),
                                               _mm256_srli_epi32(_mm256_castps_si256(v.hi), 16));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + k),
                        _mm256_permute4x64_epi64(packed, 0xd8));
  }
#endif
  for (; k < count; ++k) dst[k] = f32_to_bf16(e4m3_to_f32(q[k]) * 0x1p-8f);
}
#endif

}  // namespace qmpi::cpu
