// The inner loops shared by the int4 GEMV (decode) and the blocked int4 GEMM (prefill): a tile
// of RR weight rows times XR rows of x, over all inputs, with the weights dequantized in
// registers and never written out.
//
// Dequantizing by table: a 4-bit weight q of (row, group) stands for (q - z) * s, one of 16
// floats. VPERMPS reads only the low 4 bits of each index lane, so with those 16 floats in one
// register, `words >> 4j` used as the index gives the 16 dequantized j-th weights of 16 packed
// words in one instruction: no mask, no int->float convert, no scale multiply. x is laid out to
// match once per call: plane j of an x row holds input 8v + j of every word v.
#pragma once
#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/aligned.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/x86.h"
#include "kernels/kernel_types.h"

namespace qmpi::cpu::int4 {

// x in plane layout: row i, plane j, word v at planes[(i * 8 + j) * stride + v]; zero past the
// last word, a vector's worth, so a tile may load a whole vector at the last word.
struct PlaneX {
  int64_t stride = 0;
  AlignedArray<float> planes;
};

inline int64_t plane_stride(const Int4WeightView& w) {
  return w.words + 16;
}

inline PlaneX alloc_planes(int64_t n, const Int4WeightView& w) {
  PlaneX p;
  p.stride = plane_stride(w);
  p.planes = make_aligned<float>(size_t(n * 8 * p.stride));
  return p;
}

// Row i of x into its planes (x_index gathers act-order inputs; -1 is padding).
inline void pack_row(const float* x, int64_t i, const Int4WeightView& w, PlaneX& p) {
  const float* xi = x + i * w.in_features;
  float* dst = p.planes.get() + i * 8 * p.stride;
  for (int j = 0; j < 8; ++j) {
    float* plane = dst + j * p.stride;
    for (int64_t v = 0; v < w.words; ++v) {
      const int64_t k = v * 8 + j;
      if (w.x_index)
        plane[v] = w.x_index[k] < 0 ? 0.0f : xi[w.x_index[k]];
      else
        plane[v] = k < w.in_features ? xi[k] : 0.0f;
    }
    std::fill(plane + w.words, plane + p.stride, 0.0f);
  }
}

struct TileArgs {
  const Int4WeightView* w;
  const PlaneX* x;
  const float* bias;  // float32 or null
  float* out;         // [n][w->rows]
};

#if defined(__AVX512F__)

// How far ahead of each weight load the first pass over a row prefetches, into L2: as the
// bf16 GEMV found on this Zen 4 host, L2 keeps more misses in flight than L1.
constexpr int64_t kPrefetchWords = 16 * 1024 / 4;

// Rows [r, r + RR) times x rows [i, i + XR). Prefetch: this pass reads the weights from DRAM.
template <int RR, int XR, bool Prefetch>
inline void tile(const TileArgs& a, int64_t r, int64_t i) {
  const Int4WeightView& w = *a.w;
  // Two accumulators per output when there are few: each FMA chain then waits on itself only
  // every other step.
  constexpr int A = XR <= 2 ? 2 : 1;
  const uint32_t* q[RR];
  for (int rr = 0; rr < RR; ++rr) q[rr] = w.qweight + (r + rr) * w.words;
  const float* xs[XR];
  for (int j = 0; j < XR; ++j) xs[j] = a.x->planes.get() + (i + j) * 8 * a.x->stride;
  const int64_t stride = a.x->stride;
  __m512 acc[A][RR][XR];
  for (int h = 0; h < A; ++h)
    for (int rr = 0; rr < RR; ++rr)
      for (int j = 0; j < XR; ++j) acc[h][rr][j] = _mm512_setzero_ps();
  const __m512 iota = _mm512_setr_ps(0.f, 1.f, 2.f, 3.f, 4.f, 5.f, 6.f, 7.f, 8.f, 9.f, 10.f, 11.f,
                                     12.f, 13.f, 14.f, 15.f);
  for (int64_t g = 0; g < w.groups; ++g) {
    __m512 table[RR];
    for (int rr = 0; rr < RR; ++rr) {
      const int64_t e = (r + rr) * w.groups + g;
      table[rr] = _mm512_mul_ps(_mm512_sub_ps(iota, _mm512_set1_ps(float(w.zeros[e]))),
                                _mm512_set1_ps(half_to_f32(w.scales[e])));
    }
    const int64_t we = w.group_words[g + 1];
    for (int64_t v = w.group_words[g]; v < we; v += 16) {
      // Words past the group belong to the next one: their lanes are zeroed by the permute.
      const __mmask16 m = we - v >= 16 ? __mmask16(0xffff) : __mmask16((1u << (we - v)) - 1);
      __m512i words[RR];
      for (int rr = 0; rr < RR; ++rr) {
        if constexpr (Prefetch) __builtin_prefetch(q[rr] + v + kPrefetchWords, 0, 2);
        words[rr] = _mm512_maskz_loadu_epi32(m, q[rr] + v);
      }
      for (int b = 0; b < 8; ++b) {
        __m512 wv[RR];
        for (int rr = 0; rr < RR; ++rr)
          wv[rr] = _mm512_maskz_permutexvar_ps(m, _mm512_srli_epi32(words[rr], unsigned(4 * b)),
                                               table[rr]);
        for (int j = 0; j < XR; ++j) {
          const __m512 xv = _mm512_loadu_ps(xs[j] + b * stride + v);
          for (int rr = 0; rr < RR; ++rr)
            acc[b % A][rr][j] = _mm512_fmadd_ps(wv[rr], xv, acc[b % A][rr][j]);
        }
      }
    }
  }
  for (int rr = 0; rr < RR; ++rr)
    for (int j = 0; j < XR; ++j) {
      __m512 s = acc[0][rr][j];
      if constexpr (A == 2) s = _mm512_add_ps(s, acc[1][rr][j]);
      a.out[(i + j) * w.rows + r + rr] = _mm512_reduce_add_ps(s) + (a.bias ? a.bias[r + rr] : 0.0f);
    }
}

#else  // portable: the same tile, one weight at a time

template <int RR, int XR, bool Prefetch>
inline void tile(const TileArgs& a, int64_t r, int64_t i) {
  const Int4WeightView& w = *a.w;
  for (int rr = 0; rr < RR; ++rr)
    for (int j = 0; j < XR; ++j) {
      const uint32_t* q = w.qweight + (r + rr) * w.words;
      const float* xs = a.x->planes.get() + (i + j) * 8 * a.x->stride;
      float s = 0.0f;
      for (int64_t g = 0; g < w.groups; ++g) {
        const int64_t e = (r + rr) * w.groups + g;
        const float scale = half_to_f32(w.scales[e]), zero = float(w.zeros[e]);
        for (int64_t v = w.group_words[g]; v < w.group_words[g + 1]; ++v)
          for (int b = 0; b < 8; ++b)
            s += (float((q[v] >> (4 * b)) & 15u) - zero) * scale * xs[b * a.x->stride + v];
      }
      a.out[(i + j) * w.rows + r + rr] = s + (a.bias ? a.bias[r + rr] : 0.0f);
    }
}

#endif

template <int RR, int XR>
inline void tile_at(const TileArgs& a, int64_t r, int64_t i, bool prefetch) {
  if (prefetch)
    tile<RR, XR, true>(a, r, i);
  else
    tile<RR, XR, false>(a, r, i);
}

// Rows [r, r + RR) times x rows [i0, i1), in tiles of up to XR x rows; only the first tile
// (the one that reads the weights from DRAM) prefetches, and only with Prefetch.
template <int RR, int XR, bool Prefetch>
inline void row_tile(const TileArgs& a, int64_t r, int64_t i0, int64_t i1) {
  int64_t i = i0;
  if constexpr (XR >= 8)
    for (; i + 8 <= i1; i += 8) tile_at<RR, 8>(a, r, i, Prefetch && i == i0);
  if constexpr (XR >= 4)
    for (; i + 4 <= i1; i += 4) tile_at<RR, 4>(a, r, i, Prefetch && i == i0);
  for (; i + 2 <= i1; i += 2) tile_at<RR, 2>(a, r, i, Prefetch && i == i0);
  for (; i < i1; ++i) tile_at<RR, 1>(a, r, i, Prefetch && i == i0);
}

// Weight rows [r0, r1) times x rows [i0, i1): tiles of RR rows, then single rows for the rest.
template <int RR, int XR, bool Prefetch>
inline void rows_range(const TileArgs& a, int64_t r0, int64_t r1, int64_t i0, int64_t i1) {
  int64_t r = r0;
  for (; r + RR <= r1; r += RR) row_tile<RR, XR, Prefetch>(a, r, i0, i1);
  for (; r < r1; ++r) row_tile<1, XR, Prefetch>(a, r, i0, i1);
}

// One parallel region of nt threads: x packed into planes, then run(args, r0, r1) on each
// thread's contiguous share of the weight rows, in units of `quantum` rows.
template <class F>
inline void parallel_rows(const float* x, int64_t n, const Int4WeightView& w,
                          const WeightView* bias, float* out, int nt, int64_t quantum, F&& run) {
  PlaneX px = alloc_planes(n, w);
  const AlignedArray<float> b = widen(bias);
  const TileArgs a{&w, &px, b.get(), out};
#pragma omp parallel num_threads(nt)
  {
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i) pack_row(x, i, w, px);
    const Range rr = split_range(w.rows, quantum, omp_get_thread_num(), omp_get_num_threads());
    run(a, rr.begin, rr.end);
  }
}

}  // namespace qmpi::cpu::int4
