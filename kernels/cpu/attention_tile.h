// The inner loops of the CPU attention kernel: one tile of kTile keys against a block of query
// vectors (query heads of one KV head, for one or several new tokens). Each key and value read
// from the cache is used by every vector of the block while it sits in registers or L1, so a
// long prefill reads the cache once per block of tokens instead of once per token, and a
// decode step's query heads share one conversion of each key.
#pragma once
#include <algorithm>
#include <cstdint>
#include <utility>

#include "kernels/cpu/x86.h"

namespace qmpi::cpu::attn {

constexpr int32_t kTile = 32;  // keys per tile: two 16-lane vectors of scores per query vector

// f.template operator()<n>() for a run-time n in [1, Max]: the last, partial block of a loop over
// blocks of register-resident vectors, whose count must be a template argument.
template <class F, int... I>
inline void with_count(int32_t n, F& f, std::integer_sequence<int, I...>) {
  ((n == I + 1 ? (f.template operator()<I + 1>(), true) : false) || ...);
}
template <int Max, class F>
inline void with_count(int32_t n, F&& f) {
  with_count(n, f, std::make_integer_sequence<int, Max>{});
}

// kt[c * kTile + j] = rows[j][c] for the tile's nk keys (j >= nk: zero), c < d. The score loop
// then multiplies one broadcast query element by 16 keys at a time, with no horizontal sums.
inline void transpose_keys(const float* const* rows, int32_t nk, int32_t d, float* kt) {
#if defined(__AVX512F__)
  for (int32_t j0 = 0; j0 < kTile; j0 += 16)
    for (int32_t c0 = 0; c0 < d; c0 += 16) {
      const int32_t w = std::min(16, d - c0);
      const __mmask16 lanes = __mmask16((1u << w) - 1);
      __m512 r[16];
      for (int32_t j = 0; j < 16; ++j)
        r[j] = j0 + j < nk ? _mm512_maskz_loadu_ps(lanes, rows[j0 + j] + c0) : _mm512_setzero_ps();
      // Within each 128-bit lane L: pairs of rows interleaved, then columns 4L + q of rows
      // 4k .. 4k + 3 in u[4k + q], then the four lanes of a column gathered across row groups.
      __m512 t[16], u[16];
      for (int k = 0; k < 8; ++k) {
        t[2 * k] = _mm512_unpacklo_ps(r[2 * k], r[2 * k + 1]);
        t[2 * k + 1] = _mm512_unpackhi_ps(r[2 * k], r[2 * k + 1]);
      }
      for (int k = 0; k < 4; ++k) {
        const __m512d a = _mm512_castps_pd(t[4 * k]), b = _mm512_castps_pd(t[4 * k + 2]);
        const __m512d e = _mm512_castps_pd(t[4 * k + 1]), f = _mm512_castps_pd(t[4 * k + 3]);
        u[4 * k] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
        u[4 * k + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
        u[4 * k + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(e, f));
        u[4 * k + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(e, f));
      }
      for (int q = 0; q < 4; ++q) {
        const __m512 v = _mm512_shuffle_f32x4(u[q], u[4 + q], 0x88);
        const __m512 x = _mm512_shuffle_f32x4(u[q], u[4 + q], 0xdd);
        const __m512 v2 = _mm512_shuffle_f32x4(u[8 + q], u[12 + q], 0x88);
        const __m512 x2 = _mm512_shuffle_f32x4(u[8 + q], u[12 + q], 0xdd);
        const __m512 col[4] = {_mm512_shuffle_f32x4(v, v2, 0x88), _mm512_shuffle_f32x4(x, x2, 0x88),
                               _mm512_shuffle_f32x4(v, v2, 0xdd),
                               _mm512_shuffle_f32x4(x, x2, 0xdd)};
        for (int L = 0; L < 4; ++L)
          if (4 * L + q < w) _mm512_storeu_ps(kt + (c0 + 4 * L + q) * kTile + j0, col[L]);
      }
    }
#else
  for (int32_t c = 0; c < d; ++c)
    for (int32_t j = 0; j < kTile; ++j) kt[c * kTile + j] = j < nk ? rows[j][c] : 0.0f;
#endif
}

#if defined(__AVX512F__)
// score[i * kTile + j] = q_i . key_j for NV query vectors (rows of q, stride d).
template <int NV>
inline void scores_block(const float* q, int32_t d, const float* kt, float* score) {
  __m512 lo[NV], hi[NV];
  for (int i = 0; i < NV; ++i) lo[i] = hi[i] = _mm512_setzero_ps();
  for (int32_t c = 0; c < d; ++c) {
    const __m512 k0 = _mm512_loadu_ps(kt + c * kTile), k1 = _mm512_loadu_ps(kt + c * kTile + 16);
    for (int i = 0; i < NV; ++i) {
      const __m512 b = _mm512_set1_ps(q[i * d + c]);
      lo[i] = _mm512_fmadd_ps(b, k0, lo[i]);
      hi[i] = _mm512_fmadd_ps(b, k1, hi[i]);
    }
  }
  for (int i = 0; i < NV; ++i) {
    _mm512_storeu_ps(score + i * kTile, lo[i]);
    _mm512_storeu_ps(score + i * kTile + 16, hi[i]);
  }
}

// acc_i[c0 .. c0 + 64) += sum over j < nk of p[i * kTile + j] * values[j][c0 ..], NV vectors.
template <int NV>
inline void values_block(const float* p, const float* const* values, int32_t nk, int32_t d,
                         int32_t c0, float* acc) {
  __mmask16 m[4];
  for (int z = 0; z < 4; ++z) {
    const int32_t w = std::clamp(d - c0 - 16 * z, 0, 16);
    m[z] = __mmask16((1u << w) - 1);
  }
  __m512 a[NV][4];
  for (int i = 0; i < NV; ++i)
    for (int z = 0; z < 4; ++z) a[i][z] = _mm512_maskz_loadu_ps(m[z], acc + i * d + c0 + 16 * z);
  for (int32_t j = 0; j < nk; ++j) {
    const float* v = values[j] + c0;
    __m512 x[4];
    for (int z = 0; z < 4; ++z) x[z] = _mm512_maskz_loadu_ps(m[z], v + 16 * z);
    for (int i = 0; i < NV; ++i) {
      const __m512 b = _mm512_set1_ps(p[i * kTile + j]);
      for (int z = 0; z < 4; ++z) a[i][z] = _mm512_fmadd_ps(b, x[z], a[i][z]);
    }
  }
  for (int i = 0; i < NV; ++i)
    for (int z = 0; z < 4; ++z) _mm512_mask_storeu_ps(acc + i * d + c0 + 16 * z, m[z], a[i][z]);
}
#endif

// score[i * kTile + j] = q_i . key_j for the nv query vectors q (stride d) and the tile's keys,
// transposed in kt (transpose_keys).
inline void tile_scores(const float* q, int32_t nv, int32_t d, const float* kt, float* score) {
#if defined(__AVX512F__)
  int32_t i = 0;
  for (; i + 8 <= nv; i += 8) scores_block<8>(q + i * d, d, kt, score + i * kTile);
  if (i < nv)
    with_count<7>(nv - i, [&]<int N>() { scores_block<N>(q + i * d, d, kt, score + i * kTile); });
#else
  for (int32_t i = 0; i < nv; ++i)
    for (int32_t j = 0; j < kTile; ++j) {
      float s = 0.0f;
      for (int32_t c = 0; c < d; ++c) s += q[i * d + c] * kt[c * kTile + j];
      score[i * kTile + j] = s;
    }
#endif
}

// acc_i += sum over j < nk of p[i * kTile + j] * values[j] for the nv vectors (acc stride d,
// values: nk rows of d elements).
inline void tile_values(const float* p, int32_t nv, const float* const* values, int32_t nk,
                        int32_t d, float* acc) {
#if defined(__AVX512F__)
  for (int32_t c0 = 0; c0 < d; c0 += 64) {
    int32_t i = 0;
    for (; i + 6 <= nv; i += 6) values_block<6>(p + i * kTile, values, nk, d, c0, acc + i * d);
    if (i < nv)
      with_count<5>(
          nv - i, [&]<int N>() { values_block<N>(p + i * kTile, values, nk, d, c0, acc + i * d); });
  }
#else
  for (int32_t i = 0; i < nv; ++i)
    for (int32_t j = 0; j < nk; ++j)
      for (int32_t c = 0; c < d; ++c) acc[i * d + c] += p[i * kTile + j] * values[j][c];
#endif
}

}  // namespace qmpi::cpu::attn
