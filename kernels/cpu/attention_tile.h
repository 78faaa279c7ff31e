// The inner loops of the CPU attention kernel: one tile of kTile keys against a block of query
// vectors (query heads of one KV head, for one or several new tokens). Each key and value read
// from the cache is used by every vector of the block while it sits in registers or L1, so a
// long prefill reads the cache once per block of tokens instead of once per token, and a
// decode step's query heads share one conversion of each key.
#pragma once
#include <algorithm>
#include <bit>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "core/dtype.h"
#include "kernels/cpu/vec.h"
#include "kernels/cpu/x86.h"

namespace qmpi::cpu::attn {

constexpr int32_t kTile = 32;  // keys per tile: kTile / vec::kLanes vectors of scores per query

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

// kt[c * kTile + j] = rows[j][c] for the tile's nk keys (j >= nk: zero), c < d, for 4-byte
// elements: floats, or bf16 pairs as uint32. The score loop then multiplies one broadcast query
// element by 16 keys at a time, with no horizontal sums.
template <class T>
inline void transpose_keys(const T* const* rows, int32_t nk, int32_t d, T* kt) {
  static_assert(sizeof(T) == 4);
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
#elif defined(QMPI_CPU_VEC)
  // AVX2: 8 x 8 blocks, each transposed in registers (vec::transpose); columns past the last
  // multiple of 8 go one element at a time.
  const int32_t d8 = d / 8 * 8;
  for (int32_t j0 = 0; j0 < kTile; j0 += 8)
    for (int32_t c0 = 0; c0 < d8; c0 += 8) {
      vec::F r[8];
      for (int32_t j = 0; j < 8; ++j)
        r[j] = j0 + j < nk ? vec::load(reinterpret_cast<const float*>(rows[j0 + j] + c0))
                           : vec::zero();
      vec::transpose(r);
      for (int32_t c = 0; c < 8; ++c)
        vec::store(reinterpret_cast<float*>(kt + (c0 + c) * kTile + j0), r[c]);
    }
  for (int32_t c = d8; c < d; ++c)
    for (int32_t j = 0; j < kTile; ++j) kt[c * kTile + j] = j < nk ? rows[j][c] : T(0);
#else
  for (int32_t c = 0; c < d; ++c)
    for (int32_t j = 0; j < kTile; ++j) kt[c * kTile + j] = j < nk ? rows[j][c] : T(0);
#endif
}

inline float float_of(float x) {
  return x;
}
inline float float_of(uint16_t bf16) {
  return bf16_to_f32(bf16);
}

#if defined(QMPI_CPU_VEC)
// kt[c * kTile + j] = rows[j][c] as float32 for the tile's nk keys (j >= nk: zero) of d = 2 words
// bf16 elements, read as pairs (uint32): kLanes x kLanes blocks of pairs transposed in registers,
// each transposed vector then split into its even and odd column (vec::split_bf16_pairs), so no
// element is widened before the transpose or stored twice. words a multiple of kLanes.
inline void transpose_bf16_keys(const uint32_t* const* rows, int32_t nk, int32_t words, float* kt) {
  using namespace vec;
  for (int32_t j0 = 0; j0 < kTile; j0 += kLanes)
    for (int32_t w0 = 0; w0 < words; w0 += kLanes) {
      F r[kLanes];
      for (int32_t j = 0; j < kLanes; ++j)
        r[j] = j0 + j < nk ? load(reinterpret_cast<const float*>(rows[j0 + j] + w0)) : zero();
      transpose(r);
      for (int32_t w = 0; w < kLanes; ++w) {
        F even, odd;
        split_bf16_pairs(r[w], even, odd);
        store(kt + 2 * (w0 + w) * kTile + j0, even);
        store(kt + (2 * (w0 + w) + 1) * kTile + j0, odd);
      }
    }
}

constexpr int kKeyVecs = kTile / vec::kLanes;  // vectors of scores per query vector
// Query vectors per block of the score loop and of the P.V loop, and the P.V loop's output width
// in vectors: each fills most of the register file (AVX-512's 32 or AVX2's 16) with
// accumulators, next to the operands of one step.
constexpr int kScoreRows = vec::kLanes == 16 ? 8 : 3;
constexpr int kValueRows = vec::kLanes == 16 ? 6 : 5;
constexpr int kValueVecs = vec::kLanes == 16 ? 4 : 2;
constexpr int32_t kValueWidth = kValueVecs * vec::kLanes;

// acc + q * k[0..kLanes): f32 lanes.
inline vec::F madd(vec::F acc, float q, const float* k) {
  return vec::fma(vec::splat(q), vec::load(k), acc);
}
#endif
#if defined(__AVX512BF16__)
// acc + q . k[j] for 16 bf16 pairs k[j] (uint32 each) and the pair q: VDPBF16PS, which rounds
// nothing further (products exact, sums in float32).
inline __m512 madd(__m512 acc, uint32_t q, const uint32_t* k) {
  return _mm512_dpbf16_ps(acc, (__m512bh)_mm512_loadu_si512(k),
                          (__m512bh)_mm512_set1_epi32(int32_t(q)));
}
#endif

#if defined(QMPI_CPU_VEC)
// score[i * kTile + j] = q_i . key_j for NV query vectors (rows of q, stride n elements: floats,
// or bf16 pairs). A block of fewer than kScoreRows vectors sums Split interleaved sets of
// elements, so that it still has about as many independent FMA chains as a full block (one
// vector's 4 chains of 64 dependent FMAs waited on the FMA latency).
template <int NV, class T>
inline void scores_block(const T* q, int32_t n, const T* kt, float* score) {
  constexpr int Split = std::min(4, int(std::bit_floor(unsigned(kScoreRows / NV))));
  vec::F a[Split][NV][kKeyVecs];
  for (int s = 0; s < Split; ++s)
    for (int i = 0; i < NV; ++i)
      for (int z = 0; z < kKeyVecs; ++z) a[s][i][z] = vec::zero();
  int32_t c = 0;
  for (; c + Split <= n; c += Split)
    for (int s = 0; s < Split; ++s)
      for (int i = 0; i < NV; ++i)
        for (int z = 0; z < kKeyVecs; ++z)
          a[s][i][z] = madd(a[s][i][z], q[i * n + c + s], kt + (c + s) * kTile + z * vec::kLanes);
  for (; c < n; ++c)
    for (int i = 0; i < NV; ++i)
      for (int z = 0; z < kKeyVecs; ++z)
        a[0][i][z] = madd(a[0][i][z], q[i * n + c], kt + c * kTile + z * vec::kLanes);
  for (int i = 0; i < NV; ++i)
    for (int z = 0; z < kKeyVecs; ++z) {
      vec::F t = a[0][i][z];
      for (int s = 1; s < Split; ++s) t = vec::add(t, a[s][i][z]);
      vec::store(score + i * kTile + z * vec::kLanes, t);
    }
}

// acc_i[c0 .. c0 + kValueWidth) += sum over j < nk of p[i * kTile + j] * values[j][c0 ..], NV
// vectors, any d.
template <int NV>
inline void values_block(const float* p, const float* const* values, int32_t nk, int32_t d,
                         int32_t c0, float* acc) {
  int w[kValueVecs];
  for (int z = 0; z < kValueVecs; ++z) w[z] = std::clamp(d - c0 - vec::kLanes * z, 0, vec::kLanes);
  vec::F a[NV][kValueVecs];
  for (int i = 0; i < NV; ++i)
    for (int z = 0; z < kValueVecs; ++z)
      a[i][z] = vec::load_first(acc + i * d + c0 + vec::kLanes * z, w[z]);
  for (int32_t j = 0; j < nk; ++j) {
    const float* v = values[j] + c0;
    vec::F x[kValueVecs];
    for (int z = 0; z < kValueVecs; ++z) x[z] = vec::load_first(v + vec::kLanes * z, w[z]);
    for (int i = 0; i < NV; ++i) {
      const vec::F b = vec::splat(p[i * kTile + j]);
      for (int z = 0; z < kValueVecs; ++z) a[i][z] = vec::fma(b, x[z], a[i][z]);
    }
  }
  for (int i = 0; i < NV; ++i)
    for (int z = 0; z < kValueVecs; ++z)
      vec::store_first(acc + i * d + c0 + vec::kLanes * z, w[z], a[i][z]);
}

// The P.V loop for d a multiple of 2 kLanes (every Qwen head): whole vectors, float32 rows or bf16
// ones widened as loaded. Accumulators per block: kValueAccs, next to the operands of one step.
constexpr int kValueAccs = vec::kLanes == 16 ? 24 : 12;
inline vec::F load_whole(const float* p) {
  return vec::load(p);
}
inline vec::F load_whole(const uint16_t* p) {
  return vec::load_bf16(p);
}

// acc_i[c0 .. c0 + Vecs kLanes) += sum over j < nk of p[i * kTile + j] * values[j][c0 ..].
template <int NV, int Vecs, class T>
inline void values_run(const float* p, const T* const* values, int32_t nk, int32_t d, int32_t c0,
                       float* acc) {
  vec::F a[NV][Vecs];
  for (int i = 0; i < NV; ++i)
    for (int z = 0; z < Vecs; ++z) a[i][z] = vec::load(acc + i * d + c0 + vec::kLanes * z);
  for (int32_t j = 0; j < nk; ++j) {
    const T* v = values[j] + c0;
    vec::F x[Vecs];
    for (int z = 0; z < Vecs; ++z) x[z] = load_whole(v + vec::kLanes * z);
    for (int i = 0; i < NV; ++i) {
      const vec::F b = vec::splat(p[i * kTile + j]);
      for (int z = 0; z < Vecs; ++z) a[i][z] = vec::fma(b, x[z], a[i][z]);
    }
  }
  for (int i = 0; i < NV; ++i)
    for (int z = 0; z < Vecs; ++z) vec::store(acc + i * d + c0 + vec::kLanes * z, a[i][z]);
}

// All of d for NV vectors, Vecs vectors of columns at a time: as wide as keeps about kValueAccs
// FMA chains (a block of one vector two vectors wide waited on the FMA latency), as d allows.
template <int NV, int Vecs, class T>
inline void values_columns(const float* p, const T* const* values, int32_t nk, int32_t d,
                           float* acc) {
  if constexpr (Vecs > 2) {
    if (d % (Vecs * vec::kLanes) != 0) return values_columns<NV, Vecs / 2>(p, values, nk, d, acc);
  }
  for (int32_t c0 = 0; c0 < d; c0 += Vecs * vec::kLanes)
    values_run<NV, Vecs>(p, values, nk, d, c0, acc);
}
#endif

// score[i * kTile + j] = q_i . key_j for the nv query vectors q (stride n elements) and the
// tile's keys, transposed in kt (transpose_keys). T is float, or uint32 (bf16 pairs: only where
// __AVX512BF16__ is defined).
template <class T>
inline void tile_scores(const T* q, int32_t nv, int32_t n, const T* kt, float* score) {
#if defined(QMPI_CPU_VEC)
  int32_t i = 0;
  for (; i + kScoreRows <= nv; i += kScoreRows)
    scores_block<kScoreRows>(q + i * n, n, kt, score + i * kTile);
  if (i < nv)
    with_count<kScoreRows - 1>(
        nv - i, [&]<int N>() { scores_block<N>(q + i * n, n, kt, score + i * kTile); });
#else
  for (int32_t i = 0; i < nv; ++i)
    for (int32_t j = 0; j < kTile; ++j) {
      float s = 0.0f;
      for (int32_t c = 0; c < n; ++c) s += q[i * n + c] * kt[c * kTile + j];
      score[i * kTile + j] = s;
    }
#endif
}

// acc_i += sum over j < nk of p[i * kTile + j] * values[j] for the nv vectors (acc stride d,
// values: nk rows of d elements, float32 or bf16).
template <class T>
inline void tile_values(const float* p, int32_t nv, const T* const* values, int32_t nk, int32_t d,
                        float* acc) {
#if defined(QMPI_CPU_VEC)
  if (d % (2 * vec::kLanes) == 0) {
    constexpr int R = kValueAccs / 2;
    int32_t i = 0;
    for (; i + R <= nv; i += R) values_columns<R, 2>(p + i * kTile, values, nk, d, acc + i * d);
    if (i < nv)
      with_count<R - 1>(nv - i, [&]<int N>() {
        constexpr int Vecs = std::min(8, int(std::bit_floor(unsigned(kValueAccs / N))));
        values_columns<N, Vecs>(p + i * kTile, values, nk, d, acc + i * d);
      });
    return;
  }
  if constexpr (std::is_same_v<T, float>) {
    for (int32_t c0 = 0; c0 < d; c0 += kValueWidth) {
      int32_t i = 0;
      for (; i + kValueRows <= nv; i += kValueRows)
        values_block<kValueRows>(p + i * kTile, values, nk, d, c0, acc + i * d);
      if (i < nv)
        with_count<kValueRows - 1>(nv - i, [&]<int N>() {
          values_block<N>(p + i * kTile, values, nk, d, c0, acc + i * d);
        });
    }
    return;
  }
#endif
  for (int32_t i = 0; i < nv; ++i)
    for (int32_t j = 0; j < nk; ++j)
      for (int32_t c = 0; c < d; ++c) acc[i * d + c] += p[i * kTile + j] * float_of(values[j][c]);
}

#if defined(__AVX512BF16__)
// The bf16 P.V: VDPBF16PS sums pairs along its operands, so keys 2j and 2j + 1 go together: the
// pair's weights p (bf16, one uint32 per pair) against their value rows interleaved element by
// element (unpacklo/hi_epi16, no conversion). The interleave works within 128-bit lanes, so the
// 32 outputs of elements c0 .. c0 + 32 sit in "pair order": lane 4L + r of the first 16 holds
// element c0 + 8L + r, of the second c0 + 8L + 4 + r (L, r < 4); to_natural_order undoes it once.
// acc_i[c0 ..] += sum over pairs j of p[i * kTile / 2 + j] . (values[2j], values[2j + 1]), NV
// vectors.
template <int NV>
inline void values_block_bf16(const uint32_t* p, const uint16_t* const* values, int32_t pairs,
                              int32_t d, int32_t c0, float* acc) {
  __m512 a[NV][2];
  for (int i = 0; i < NV; ++i)
    for (int z = 0; z < 2; ++z) a[i][z] = _mm512_loadu_ps(acc + i * d + c0 + 16 * z);
  for (int32_t j = 0; j < pairs; ++j) {
    const __m512i x = _mm512_loadu_si512(values[2 * j] + c0);
    const __m512i y = _mm512_loadu_si512(values[2 * j + 1] + c0);
    const __m512bh lo = (__m512bh)_mm512_unpacklo_epi16(x, y);
    const __m512bh hi = (__m512bh)_mm512_unpackhi_epi16(x, y);
    for (int i = 0; i < NV; ++i) {
      const __m512bh b = (__m512bh)_mm512_set1_epi32(int32_t(p[i * (kTile / 2) + j]));
      a[i][0] = _mm512_dpbf16_ps(a[i][0], lo, b);
      a[i][1] = _mm512_dpbf16_ps(a[i][1], hi, b);
    }
  }
  for (int i = 0; i < NV; ++i)
    for (int z = 0; z < 2; ++z) _mm512_storeu_ps(acc + i * d + c0 + 16 * z, a[i][z]);
}

// acc_i += sum over j < nk of p_j values[j] for the nv vectors (acc stride d, in pair order;
// p: kTile / 2 bf16 pairs per vector; values: kTile rows of d bf16, those past nk zero; d a
// multiple of 32).
inline void tile_values_bf16(const uint32_t* p, int32_t nv, const uint16_t* const* values,
                             int32_t nk, int32_t d, float* acc) {
  const int32_t pairs = (nk + 1) / 2;
  for (int32_t c0 = 0; c0 < d; c0 += 32) {
    int32_t i = 0;
    for (; i + 8 <= nv; i += 8)
      values_block_bf16<8>(p + i * (kTile / 2), values, pairs, d, c0, acc + i * d);
    if (i < nv)
      with_count<7>(nv - i, [&]<int N>() {
        values_block_bf16<N>(p + i * (kTile / 2), values, pairs, d, c0, acc + i * d);
      });
  }
}

// One vector of d outputs from pair order (values_block_bf16) back to element order.
inline void to_natural_order(float* acc, int32_t d) {
  float t[32];
  for (int32_t c0 = 0; c0 < d; c0 += 32) {
    for (int L = 0; L < 4; ++L)
      for (int r = 0; r < 4; ++r) {
        t[8 * L + r] = acc[c0 + 4 * L + r];
        t[8 * L + 4 + r] = acc[c0 + 16 + 4 * L + r];
      }
    std::copy(t, t + 32, acc + c0);
  }
}
#endif

}  // namespace qmpi::cpu::attn
