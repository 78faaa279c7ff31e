// One float32 SIMD register of the widest kind the build has (AVX-512: 16 lanes; AVX2 with FMA
// and F16C: 8) and the operations the float32 kernels use (GEMV and GEMM tiles, the quantized
// prefill panel, attention, exp, log-sum-exp, LoRA), so that each is written once for both: a CPU
// without AVX-512 (the CI host is an AVX2-only EPYC) otherwise ran the portable loops, at a fifth
// of its read bandwidth in decode. QMPI_CPU_VEC is defined where one of the two exists.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/x86.h"

namespace qmpi::cpu::vec {

#if defined(__AVX512F__)
#define QMPI_CPU_VEC 1
using F = __m512;
inline constexpr int kLanes = 16;
inline F zero() {
  return _mm512_setzero_ps();
}
inline F splat(float s) {
  return _mm512_set1_ps(s);
}
inline F load(const float* p) {
  return _mm512_loadu_ps(p);
}
inline void store(float* p, F v) {
  _mm512_storeu_ps(p, v);
}
inline F fma(F a, F b, F c) {
  return _mm512_fmadd_ps(a, b, c);
}
inline F mul(F a, F b) {
  return _mm512_mul_ps(a, b);
}
inline F add(F a, F b) {
  return _mm512_add_ps(a, b);
}
inline F sub(F a, F b) {
  return _mm512_sub_ps(a, b);
}
inline F div(F a, F b) {
  return _mm512_div_ps(a, b);
}
inline F max(F a, F b) {
  return _mm512_max_ps(a, b);
}
inline F min(F a, F b) {
  return _mm512_min_ps(a, b);
}
inline F fnma(F a, F b, F c) {  // c - a b
  return _mm512_fnmadd_ps(a, b, c);
}
inline F round_nearest(F v) {
  return _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
// p 2^n for integral n in [-150, 128], subnormal and infinite results included (vscalefps).
inline F scale_pow2(F p, F n) {
  return _mm512_scalef_ps(p, n);
}
inline float sum(F v) {
  return _mm512_reduce_add_ps(v);
}
inline float max_of(F v) {
  return _mm512_reduce_max_ps(v);
}
// The first n (<= kLanes) floats at p, zeros after them; and their store.
inline F load_first(const float* p, int n) {
  return _mm512_maskz_loadu_ps(__mmask16((1u << n) - 1), p);
}
inline void store_first(float* p, int n, F v) {
  _mm512_mask_storeu_ps(p, __mmask16((1u << n) - 1), v);
}
inline F keep_first(F v, int n) {
  return _mm512_maskz_mov_ps(__mmask16((1u << n) - 1), v);
}
// kLanes bf16 / f16 values at p, widened in order.
inline F load_bf16(const uint16_t* p) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
inline F load_f16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
// kLanes bf16 pairs (one per 32-bit lane of v) as their even and their odd elements: a shift
// and a mask widen them, with no shuffles.
inline void split_bf16_pairs(F v, F& even, F& odd) {
  const __m512i x = _mm512_castps_si512(v);
  even = _mm512_castsi512_ps(_mm512_slli_epi32(x, 16));
  odd = _mm512_castsi512_ps(_mm512_and_si512(x, _mm512_set1_epi32(int(0xffff0000u))));
}

// v[j] lane l = the old v[l] lane j: a kLanes x kLanes transpose in registers, as rounds that
// swap the off-diagonal H x H blocks of every 2H x 2H block (H = 8, 4, 2, 1). Each round's H is
// a constant, so the rows stay in registers: with H a loop variable the compiler kept v[] on the
// stack and the transpose cost more than the FMAs it feeds.
template <int H, int N = 16>
inline void transpose_round(F* v) {
  struct Index {
    alignas(64) int32_t upper[16], lower[16];
    constexpr Index() : upper(), lower() {
      for (int lane = 0; lane < 16; ++lane) {
        upper[lane] = (lane & H) ? 16 + lane - H : lane;
        lower[lane] = (lane & H) ? 16 + lane : lane + H;
      }
    }
  };
  static constexpr Index idx;
  const __m512i upper = _mm512_load_si512(idx.upper), lower = _mm512_load_si512(idx.lower);
#pragma GCC unroll 16
  for (int p = 0; p < N; ++p) {
    if (p & H) continue;
    const F a = v[p], b = v[p + H];
    v[p] = _mm512_permutex2var_ps(a, upper, b);
    v[p + H] = _mm512_permutex2var_ps(a, lower, b);
  }
}
inline void transpose(F* v) {
  transpose_round<8>(v);
  transpose_round<4>(v);
  transpose_round<2>(v);
  transpose_round<1>(v);
}
// Eight registers' halves transposed as two 8 x 8 blocks: v[j] lanes 0-7 = the old v[l] lane j,
// lanes 8-15 = the old v[l] lane 8 + j (l < 8). 24 permutes where a full transpose takes 64.
inline void transpose_halves(F* v) {
  transpose_round<4, 8>(v);
  transpose_round<2, 8>(v);
  transpose_round<1, 8>(v);
}
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define QMPI_CPU_VEC 1
using F = __m256;
inline constexpr int kLanes = 8;
inline F zero() {
  return _mm256_setzero_ps();
}
inline F splat(float s) {
  return _mm256_set1_ps(s);
}
inline F load(const float* p) {
  return _mm256_loadu_ps(p);
}
inline void store(float* p, F v) {
  _mm256_storeu_ps(p, v);
}
inline F fma(F a, F b, F c) {
  return _mm256_fmadd_ps(a, b, c);
}
inline F mul(F a, F b) {
  return _mm256_mul_ps(a, b);
}
inline F add(F a, F b) {
  return _mm256_add_ps(a, b);
}
inline F sub(F a, F b) {
  return _mm256_sub_ps(a, b);
}
inline F div(F a, F b) {
  return _mm256_div_ps(a, b);
}
inline F max(F a, F b) {
  return _mm256_max_ps(a, b);
}
inline F min(F a, F b) {
  return _mm256_min_ps(a, b);
}
inline F fnma(F a, F b, F c) {
  return _mm256_fnmadd_ps(a, b, c);
}
inline F round_nearest(F v) {
  return _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
// AVX2 has no vscalefps: 2^n is applied as 2^(n/2) times 2^(n - n/2), each a normal float built
// from its exponent bits, so that results below the smallest normal still come out as the
// subnormals (or 0) vscalefps gives.
inline F scale_pow2(F p, F n) {
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
  const auto pow2 = [](__m256i e) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(127)), 23));
  };
  return _mm256_mul_ps(_mm256_mul_ps(p, pow2(n1)), pow2(n2));
}
inline float sum(F v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline float max_of(F v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline __m256i first_lanes(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
inline F load_first(const float* p, int n) {
  return _mm256_maskload_ps(p, first_lanes(n));
}
inline void store_first(float* p, int n, F v) {
  _mm256_maskstore_ps(p, first_lanes(n), v);
}
inline F keep_first(F v, int n) {
  return _mm256_and_ps(v, _mm256_castsi256_ps(first_lanes(n)));
}
inline F load_bf16(const uint16_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
inline F load_f16(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline void split_bf16_pairs(F v, F& even, F& odd) {
  const __m256i x = _mm256_castps_si256(v);
  even = _mm256_castsi256_ps(_mm256_slli_epi32(x, 16));
  odd = _mm256_castsi256_ps(_mm256_and_si256(x, _mm256_set1_epi32(int(0xffff0000u))));
}
// v[j] lane l = the old v[l] lane j, 8 x 8: pairs of rows interleaved, then pairs of pairs,
// then the 128-bit halves swapped across.
inline void transpose(F* v) {
  F t[8], u[8];
  for (int k = 0; k < 4; ++k) {
    t[2 * k] = _mm256_unpacklo_ps(v[2 * k], v[2 * k + 1]);
    t[2 * k + 1] = _mm256_unpackhi_ps(v[2 * k], v[2 * k + 1]);
  }
  for (int k = 0; k < 2; ++k) {
    u[4 * k] = _mm256_shuffle_ps(t[4 * k], t[4 * k + 2], 0x44);
    u[4 * k + 1] = _mm256_shuffle_ps(t[4 * k], t[4 * k + 2], 0xee);
    u[4 * k + 2] = _mm256_shuffle_ps(t[4 * k + 1], t[4 * k + 3], 0x44);
    u[4 * k + 3] = _mm256_shuffle_ps(t[4 * k + 1], t[4 * k + 3], 0xee);
  }
  for (int q = 0; q < 4; ++q) {
    v[q] = _mm256_permute2f128_ps(u[q], u[4 + q], 0x20);
    v[4 + q] = _mm256_permute2f128_ps(u[q], u[4 + q], 0x31);
  }
}
#endif

#if defined(QMPI_CPU_VEC)
// 2 * kLanes bf16 values at p as their even and their odd elements.
inline void load_bf16_even_odd(const uint16_t* p, F& even, F& odd) {
  split_bf16_pairs(load(reinterpret_cast<const float*>(p)), even, odd);
}
#endif

// p itself when it has all N elements (n >= N), else its first n copied into buf with zeros after
// them: a whole vector's load of a short tail, without reading past it.
template <class T, int N>
inline const T* whole_or_padded(const T* p, int64_t n, T (&buf)[N]) {
  if (n >= N) return p;
  std::fill_n(buf, N, T(0));
  std::memcpy(buf, p, size_t(n) * sizeof(T));
  return buf;
}

}  // namespace qmpi::cpu::vec
