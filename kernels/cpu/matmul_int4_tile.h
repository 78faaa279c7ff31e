// The inner loop of the int4 GEMV (decode): one Blocks16 block of 16 weight rows times up to 8
// rows of x, over all inputs, with the weights dequantized in registers and never written out.
//
// One 64-byte load holds packed word v of 16 output rows, so output rows stay in vector lanes:
// nibble j of every lane is `word & (15 << 4j)`, converted as an unsigned integer (q * 2^4j,
// exact), and multiplied by a broadcast x input that was scaled by 2^-4j when x was packed. That
// is 3 instructions per 16 weights (and, convert, FMA), with no per-group table and no
// reduction across lanes. The zero point and the scale are applied once per segment (a group,
// or 128 inputs of a longer one) and row: sum_k (q_k - z) s x_k = s (sum_k q_k x_k - z X), X the
// segment's sum of x, packed with x. Segments bound the cancellation between the two sums: a
// whole-row group of 896 inputs in one sum lost 2.5e-6 of the largest output, past the 2e-6 the
// reference test allows, while 128 inputs stay within it as every group-128 layer does.
#pragma once
#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/aligned.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/scratch.h"
#include "kernels/cpu/vec.h"
#include "kernels/cpu/x86.h"
#include "kernels/int4_layout.h"
#include "kernels/kernel_types.h"

namespace qmpi::cpu::int4 {

constexpr int64_t kSegmentWords = 16;

// Calls f(g, v0, v1) for each segment in order: words [v0, v1) of group g.
template <class F>
inline void for_each_segment(const Int4WeightView& w, F&& f) {
  for (int64_t g = 0; g < w.groups; ++g)
    for (int64_t v = w.group_words[g]; v < w.group_words[g + 1]; v += kSegmentWords)
      f(g, v, std::min<int64_t>(v + kSegmentWords, w.group_words[g + 1]));
}

// x as the tiles read it: row i's inputs in packed order (gathered through x_index, 0 for
// padding), packed input 8v + j scaled by 2^-4j, at x[i * kp + k]; and the plain sum of each
// segment's inputs at sums[i * segments + s].
struct PackedX {
  int64_t kp = 0;
  int64_t segments = 0;
  float* x = nullptr;
  float* sums = nullptr;
};

inline PackedX alloc_packed_x(int64_t n, const Int4WeightView& w) {
  PackedX p;
  p.kp = w.words * 8;
  for_each_segment(w, [&](int64_t, int64_t, int64_t) { ++p.segments; });
  p.x = thread_scratch<float, 2>(size_t(n * p.kp));
  p.sums = thread_scratch<float, 3>(size_t(n * p.segments));
  return p;
}

// Row i of x into `p`.
inline void pack_row(const float* x, int64_t i, const Int4WeightView& w, const PackedX& p) {
  const float* xi = x + i * w.in_features;
  float* dst = p.x + i * p.kp;
  float* sums = p.sums + i * p.segments;
  constexpr float kPlaneScale[8] = {1.0f,     0x1p-4f,  0x1p-8f,  0x1p-12f,
                                    0x1p-16f, 0x1p-20f, 0x1p-24f, 0x1p-28f};
  for_each_segment(w, [&](int64_t, int64_t v0, int64_t v1) {
    float s = 0.0f;
    for (int64_t k = v0 * 8; k < v1 * 8; ++k) {
      const float v = int4_packed_input(w, xi, k);
      s += v;
      dst[k] = v * kPlaneScale[k % 8];
    }
    *sums++ = s;
  });
}

struct TileArgs {
  const Int4WeightView* w;
  PackedX x;
  const float* bias;  // float32 or null
  float* out;         // [n][w->rows]
};

// What a tile reads: the block at row r (its width, packed words, scales and zero points) and x
// rows [i, i + XR) (their packed inputs and segment sums).
template <int XR>
struct TileInputs {
  int64_t width;
  const uint32_t* q;
  const uint16_t* scales;
  const uint8_t* zeros;
  const float* xs[XR];
  const float* sums;
  TileInputs(const TileArgs& a, int64_t r, int64_t i)
      : width(int4_block_width(a.w->rows, r)),
        q(a.w->qweight + r * a.w->words),
        scales(a.w->scales + r * a.w->groups),
        zeros(a.w->zeros + r * a.w->groups),
        sums(a.x.sums + i * a.x.segments) {
    for (int j = 0; j < XR; ++j) xs[j] = a.x.x + (i + j) * a.x.kp;
  }
};

#if defined(__AVX512F__)
constexpr int kTileRows = 8;  // x rows per tile

// How far ahead of each weight load the first pass over a block prefetches, into L2: as the
// bf16 GEMV found on this Zen 4 host, L2 keeps more misses in flight than L1.
constexpr int64_t kPrefetchWords = 16 * 1024 / 4;

// sum[j] = sum_k q_k x_jk over words [v0, v1) of the block at q. Full: a block of 16 rows, read
// with plain loads (a masked load made the one-row tile 10% slower), else `width` rows under the
// mask `m`.
template <int XR, bool Prefetch, bool Full>
inline void segment_sums(const uint32_t* q, int64_t width, __mmask16 m, const float* const* xs,
                         int64_t v0, int64_t v1, __m512* sum) {
  if constexpr (Full) width = kInt4Block;
  // Independent FMA chains per x row: with one or two rows, one chain would wait on itself.
  constexpr int A = XR == 1 ? 4 : XR == 2 ? 2 : 1;
  __m512 acc[A * XR];
  for (int h = 0; h < A * XR; ++h) acc[h] = _mm512_setzero_ps();
  for (int64_t v = v0; v < v1; ++v) {
    if constexpr (Prefetch) __builtin_prefetch(q + v * width + kPrefetchWords, 0, 2);
    const __m512i words =
        Full ? _mm512_loadu_si512(q + v * width) : _mm512_maskz_loadu_epi32(m, q + v * width);
    for (int b = 0; b < 8; ++b) {
      const __m512 wv =
          _mm512_cvtepu32_ps(_mm512_and_si512(words, _mm512_set1_epi32(int32_t(15u << (4 * b)))));
      for (int j = 0; j < XR; ++j)
        acc[(b % A) * XR + j] =
            _mm512_fmadd_ps(wv, _mm512_set1_ps(xs[j][v * 8 + b]), acc[(b % A) * XR + j]);
    }
  }
  for (int j = 0; j < XR; ++j) {
    sum[j] = acc[j];
    for (int h = 1; h < A; ++h) sum[j] = _mm512_add_ps(sum[j], acc[h * XR + j]);
  }
}

// out[j] += s (sum[j] - z X_j) for group g's segment of a block (its rows under the mask m):
// their scales and zero points (at scales, zeros: the block's arrays), X_j = xsum[j * stride],
// the segment's sum of x.
template <int XR>
inline void add_segment(const uint16_t* scales, const uint8_t* zeros, int64_t g, int64_t width,
                        __mmask16 m, const __m512* sum, const float* xsum, int64_t stride,
                        __m512* out) {
  const __m512 s = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, scales + g * width));
  const __m512 sz = _mm512_mul_ps(
      s, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, zeros + g * width))));
  for (int j = 0; j < XR; ++j) {
    out[j] = _mm512_fmadd_ps(s, sum[j], out[j]);
    out[j] = _mm512_fnmadd_ps(sz, _mm512_set1_ps(xsum[j * stride]), out[j]);
  }
}

// Rows [r, r + 16) of out (those under the mask m) for x rows [i, i + XR): acc plus the bias.
template <int XR>
inline void store_block(const __m512* acc, const float* bias, __mmask16 m, int64_t r, int64_t i,
                        int64_t rows, float* out) {
  const __m512 b = bias ? _mm512_maskz_loadu_ps(m, bias + r) : _mm512_setzero_ps();
  for (int j = 0; j < XR; ++j)
    _mm512_mask_storeu_ps(out + (i + j) * rows + r, m, _mm512_add_ps(acc[j], b));
}

// The block of rows [r, r + 16) times x rows [i, i + XR). Prefetch: this pass reads the weights
// from DRAM. Not inlined: inside the caller's larger body GCC 12 kept the one-row tile's four
// accumulators on the stack, a store and a reload per FMA (half the speed).
template <int XR, bool Prefetch>
__attribute__((noinline)) void tile(const TileArgs& a, int64_t r, int64_t i) {
  const Int4WeightView& w = *a.w;
  auto [width, q, scales, zeros, xs, sums] = TileInputs<XR>(a, r, i);
  const __mmask16 m = __mmask16((1u << width) - 1);
  __m512 out[XR];
  for (int j = 0; j < XR; ++j) out[j] = _mm512_setzero_ps();
  for_each_segment(w, [&](int64_t g, int64_t v0, int64_t v1) {
    __m512 sum[XR];
    if (width == kInt4Block)
      segment_sums<XR, Prefetch, true>(q, width, m, xs, v0, v1, sum);
    else
      segment_sums<XR, Prefetch, false>(q, width, m, xs, v0, v1, sum);
    add_segment<XR>(scales, zeros, g, width, m, sum, sums++, a.x.segments, out);
  });
  store_block<XR>(out, a.bias, m, r, i, w.rows, a.out);
}

#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
// AVX2: the same tile with a block's 16 rows in two vectors of 8 lanes. AVX2 converts only
// signed integers, so plane 7 (bits 28-31, which may set the sign bit) is shifted down one bit
// before the conversion and doubled after it, both exact.

constexpr int64_t kPrefetchWords = 16 * 1024 / 4;
constexpr int kTileRows = 4;  // x rows per tile: 2 x 4 accumulators, half of AVX2's registers

// Nibble b of every lane of `words` as q * 2^(4b).
inline __m256 plane(__m256i words, int b) {
  if (b == 7) {
    const __m256 h = _mm256_cvtepi32_ps(
        _mm256_and_si256(_mm256_srli_epi32(words, 1), _mm256_set1_epi32(int32_t(15u << 27))));
    return _mm256_add_ps(h, h);
  }
  return _mm256_cvtepi32_ps(_mm256_and_si256(words, _mm256_set1_epi32(int32_t(15u << (4 * b)))));
}

// A block's `width` 16-bit (scales) or 8-bit (zero points) values as two vectors of floats,
// lanes past width zero.
inline void widen_scales(const uint16_t* p, int64_t width, __m256* out) {
  alignas(32) uint16_t buf[kInt4Block];
  p = vec::whole_or_padded(p, width, buf);
  for (int h = 0; h < 2; ++h)
    out[h] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8 * h)));
}
inline void widen_zeros(const uint8_t* p, int64_t width, __m256* out) {
  alignas(16) uint8_t buf[kInt4Block];
  p = vec::whole_or_padded(p, width, buf);
  for (int h = 0; h < 2; ++h)
    out[h] = _mm256_cvtepi32_ps(
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8 * h))));
}

// Word v of the block at q (its `width` rows; lanes past them zero unless Full) as two vectors
// of 8 lanes.
template <bool Full>
inline void load_words(const uint32_t* q, int64_t v, int64_t width, const __m256i* m,
                       __m256i* words) {
  for (int h = 0; h < 2; ++h) {
    const auto* at = reinterpret_cast<const __m256i*>(q + v * width + 8 * h);
    words[h] = Full ? _mm256_loadu_si256(at)
                    : _mm256_maskload_epi32(reinterpret_cast<const int*>(at), m[h]);
  }
}

// out[j] += s (sum[j] - z X_j) for group g's segment of a block: its rows' scales and zero
// points (at scales, zeros: the block's arrays), X_j = xsum[j * stride], the segment's sum of x.
template <int XR>
inline void add_segment(const uint16_t* scales, const uint8_t* zeros, int64_t g, int64_t width,
                        const __m256 (*sum)[2], const float* xsum, int64_t stride,
                        __m256 (*out)[2]) {
  __m256 s[2], z[2];
  widen_scales(scales + g * width, width, s);
  widen_zeros(zeros + g * width, width, z);
  for (int h = 0; h < 2; ++h) {
    const __m256 sz = _mm256_mul_ps(s[h], z[h]);
    for (int j = 0; j < XR; ++j) {
      out[j][h] = _mm256_fmadd_ps(s[h], sum[j][h], out[j][h]);
      out[j][h] = _mm256_fnmadd_ps(sz, _mm256_set1_ps(xsum[j * stride]), out[j][h]);
    }
  }
}

// Rows [r, r + 16) of out (those under the mask m) for x rows [i, i + XR): acc plus the bias.
template <int XR>
inline void store_block(const __m256 (*acc)[2], const float* bias, const __m256i* m, int64_t r,
                        int64_t i, int64_t rows, float* out) {
  for (int h = 0; h < 2; ++h) {
    const __m256 b = bias ? _mm256_maskload_ps(bias + r + 8 * h, m[h]) : _mm256_setzero_ps();
    for (int j = 0; j < XR; ++j)
      _mm256_maskstore_ps(out + (i + j) * rows + r + 8 * h, m[h], _mm256_add_ps(acc[j][h], b));
  }
}

// sum[j][h] = sum_k q_k x_jk over words [v0, v1) of the block at q, rows 8h .. 8h + 7.
template <int XR, bool Prefetch, bool Full>
inline void segment_sums(const uint32_t* q, int64_t width, const __m256i* m, const float* const* xs,
                         int64_t v0, int64_t v1, __m256 (*sum)[2]) {
  if constexpr (Full) width = kInt4Block;
  constexpr int A = XR == 1 ? 2 : 1;  // independent FMA chains per x row and half
  __m256 acc[A][XR][2];
  for (int c = 0; c < A; ++c)
    for (int j = 0; j < XR; ++j) acc[c][j][0] = acc[c][j][1] = _mm256_setzero_ps();
  for (int64_t v = v0; v < v1; ++v) {
    if constexpr (Prefetch) __builtin_prefetch(q + v * width + kPrefetchWords, 0, 2);
    __m256i words[2];
    load_words<Full>(q, v, width, m, words);
    for (int b = 0; b < 8; ++b) {
      const __m256 wv[2] = {plane(words[0], b), plane(words[1], b)};
      for (int j = 0; j < XR; ++j) {
        const __m256 xb = _mm256_broadcast_ss(xs[j] + v * 8 + b);
        for (int h = 0; h < 2; ++h) acc[b % A][j][h] = _mm256_fmadd_ps(wv[h], xb, acc[b % A][j][h]);
      }
    }
  }
  for (int j = 0; j < XR; ++j)
    for (int h = 0; h < 2; ++h)
      sum[j][h] = A == 1 ? acc[0][j][h] : _mm256_add_ps(acc[0][j][h], acc[A - 1][j][h]);
}

template <int XR, bool Prefetch>
__attribute__((noinline)) void tile(const TileArgs& a, int64_t r, int64_t i) {
  const Int4WeightView& w = *a.w;
  auto [width, q, scales, zeros, xs, sums] = TileInputs<XR>(a, r, i);
  const __m256i m[2] = {vec::first_lanes(int(width)), vec::first_lanes(int(width - 8))};
  __m256 out[XR][2];
  for (int j = 0; j < XR; ++j) out[j][0] = out[j][1] = _mm256_setzero_ps();
  for_each_segment(w, [&](int64_t g, int64_t v0, int64_t v1) {
    __m256 sum[XR][2];
    if (width == kInt4Block)
      segment_sums<XR, Prefetch, true>(q, width, m, xs, v0, v1, sum);
    else
      segment_sums<XR, Prefetch, false>(q, width, m, xs, v0, v1, sum);
    add_segment<XR>(scales, zeros, g, width, sum, sums++, a.x.segments, out);
  });
  store_block<XR>(out, a.bias, m, r, i, w.rows, a.out);
}

#else  // portable: the same sums, one output at a time
constexpr int kTileRows = 8;

template <int XR, bool Prefetch>
inline void tile(const TileArgs& a, int64_t r, int64_t i) {
  const Int4WeightView& w = *a.w;
  const int64_t width = int4_block_width(w.rows, r);
  for (int64_t l = 0; l < width; ++l)
    for (int j = 0; j < XR; ++j) {
      const float* xs = a.x.x + (i + j) * a.x.kp;
      const float* sums = a.x.sums + (i + j) * a.x.segments;
      float out = 0.0f;
      for_each_segment(w, [&](int64_t g, int64_t v0, int64_t v1) {
        float acc = 0.0f;
        for (int64_t v = v0; v < v1; ++v) {
          const uint32_t word = w.qweight[r * w.words + v * width + l];
          for (int b = 0; b < 8; ++b) acc += float(word & (15u << (4 * b))) * xs[v * 8 + b];
        }
        const float s = half_to_f32(w.scales[r * w.groups + g * width + l]);
        const float z = float(w.zeros[r * w.groups + g * width + l]);
        out += s * acc - s * z * *sums++;
      });
      a.out[(i + j) * w.rows + r + l] = out + (a.bias ? a.bias[r + l] : 0.0f);
    }
}

#endif

template <int XR>
inline void tile_at(const TileArgs& a, int64_t r, int64_t i, bool prefetch) {
  if (prefetch)
    tile<XR, true>(a, r, i);
  else
    tile<XR, false>(a, r, i);
}

// The block at row r times x rows [0, n) in tiles of 8 (where kTileRows allows), 4, 2 and 1 x
// rows; only the first tile (the one that reads the weights from DRAM) prefetches.
inline void block_times_x(const TileArgs& a, int64_t r, int64_t n) {
  int64_t i = 0;
  if constexpr (kTileRows >= 8)
    for (; i + 8 <= n; i += 8) tile_at<8>(a, r, i, i == 0);
  for (; i + 4 <= n; i += 4) tile_at<4>(a, r, i, i == 0);
  for (; i + 2 <= n; i += 2) tile_at<2>(a, r, i, i == 0);
  for (; i < n; ++i) tile_at<1>(a, r, i, i == 0);
}

}  // namespace qmpi::cpu::int4
