// The int4 decode GEMV with int16 activations: what `--dtype auto` (MatmulOptions::
// bf16_activations) runs for AWQ and GPTQ weights up to kInt4GemvInt16MaxRows rows of x on AVX2
// and AVX-512 builds; `--dtype float32` keeps the float tile (matmul_int4_tile.h), which converts
// every nibble to float32 and ran at ~17.5 GB/s of weights on the AVX2 host, compute-bound.
//
// x is quantized per segment (matmul_int4_tile.h's unit of scale and zero point, at most 128
// inputs): step dx = max|x| / 32767, q = round(x / dx). A Blocks16 word holds 8 consecutive
// inputs of one row; a vector of 8 rows' words shifted right by 4j and masked with 0x000f000f
// holds each row's inputs j and j + 4 as 16-bit integers, and VPMADDWD multiplies them with the
// pair (q_j, q_j+4) broadcast to every lane and adds the two: 8 exact int32 sums of 16 weights in
// 3 instructions (2 for j = 0) where the float tile takes 6; AVX-512 holds a block's 16 rows in
// one vector and VPDPWSSD (VNNI) multiplies and adds in one instruction. A segment's sums meet dx
// and the scale in float32, and the zero point meets the segment's sum of quantized activations:
// sum_k (q_k - z) s x_k with x_k the dequantized activations, as the float tile does with x.
// (int8 activations, VPMADDUBSW, took ~2x fewer instructions again but put the int4 model of
// auto_dtype_vs_reference at 3.4e-2 of the reference's logits, past Hugging Face's bf16 1.85e-2.)
//
// With VNNI and VBMI the same 16-bit activations go in as two signed bytes, q = 256 h + l, and
// VPDPBUSD multiplies 4 nibbles (as unsigned bytes: a word masked with 0x0f0f0f0f, and shifted
// right by 4 first) with 4 bytes of h or of l: the word's 8 products in 4 instructions and 3 for
// the planes, where the pairs take 4 + 7. The sums are exact as before: 256 sum(w h) + sum(w l).
// The split needs |q| <= 32639 (h = 128 does not fit a byte), so every build quantizes to that.
//
// Numerics: an activation is off by at most dx / 2, so an output differs from the exact product of
// the same weights by at most sum over segments of (max|x_seg| / (2 kInt4ActivationLevels)) *
// sum_{k in seg} |w_k|, plus float32 rounding; MatmulInt4.Int16ActivationGemvWithinItsBound asserts
// it against the float64 reference. The int32 sums cannot overflow: a segment adds 64 products of
// at most 2 * 15 * 32767 per lane.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/dot_products.h"
#include "kernels/cpu/matmul_int4.h"
#include "kernels/cpu/matmul_int4_tile.h"
#include "kernels/cpu/matmul_targets.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/scratch.h"
#include "kernels/cpu/x86.h"

namespace qmpi::cpu {

#if defined(QMPI_CPU_INT16_DOT)
namespace {

constexpr int64_t kGrain = 64 * 1024;  // weights per thread below which extra threads cost more

#if defined(__AVX512VNNI__) && defined(__AVX512VBMI__)
constexpr bool kSplitBytes = true;
#else
constexpr bool kSplitBytes = false;
#endif
// The split layout serves up to this many rows of x; from 4 rows the pairs' tiles are faster
// (shared planes weigh less beside 4 x XR products a word): qmpi_kernel_bench --int4 awq, 2
// threads, ms a pass, pairs / split: 1 row 5.7 / 4.8-5.5, 2 rows 6.4-7.0 / 5.6-5.9, 8 rows
// 11.8-13.8 / 12.7-14.7, 16 rows 21.6-25.0 / 24.3-28.5.
constexpr int64_t kSplitMaxRows = 3;

// Byte j of word v's 16 in the split layout: h of inputs 0, 2, 4, 6, l of the same, h of 1, 3,
// 5, 7, l of the same (the planes' order: the masked word holds the even inputs).
constexpr int split_byte(int input, bool low) {
  return (input % 2) * 8 + (low ? 4 : 0) + input / 2;
}

// x quantized for the tile: row i's packed inputs as int16, word v's at q[i * kp + 8v] as the
// pairs (8v, 8v+4), (8v+1, 8v+5), (8v+2, 8v+6), (8v+3, 8v+7) (with kSplitBytes the same 16 bytes
// hold the split layout, split_byte); each segment's step at
// steps[i * segments + s] and its sum of dequantized activations at sums[i * segments + s].
struct Int16X {
  int64_t kp = 0, segments = 0;
  bool split = false;  // the split layout (split_byte) instead of the pairs
  int16_t* q = nullptr;
  float* steps = nullptr;
  float* sums = nullptr;
};

Int16X alloc_int16_x(int64_t n, const Int4WeightView& w) {
  Int16X p;
  p.kp = w.words * 8;
  p.split = kSplitBytes && n <= kSplitMaxRows;
  int4::for_each_segment(w, [&](int64_t, int64_t, int64_t) { ++p.segments; });
  p.q = thread_scratch<int16_t, 2>(size_t(n * p.kp));
  p.steps = thread_scratch<float, 3>(size_t(n * p.segments));
  p.sums = thread_scratch<float, 4>(size_t(n * p.segments));
  return p;
}

void quantize_row(const float* x, int64_t i, const Int4WeightView& w, const Int16X& p) {
  const float* xi = x + i * w.in_features;
  int16_t* q = p.q + i * p.kp;
  float* steps = p.steps + i * p.segments;
  float* sums = p.sums + i * p.segments;
  int4::for_each_segment(w, [&](int64_t, int64_t v0, int64_t v1) {
    // The segment's inputs: x itself where they are its next ones, else gathered.
    const int64_t k0 = 8 * v0, count = 8 * (v1 - v0);
    float vals[8 * int4::kSegmentWords];
    const float* in = xi + k0;
    if (w.x_index || k0 + count > w.in_features) {
      for (int64_t k = 0; k < count; ++k) vals[k] = int4_packed_input(w, xi, k0 + k);
      in = vals;
    }
    float amax = 0.0f;
    int64_t u = v0, total = 0;
#if defined(__AVX512F__)
    // Decode's x is quantized once per call by one thread while the other waits: ~5% of an AWQ
    // step when it went element by element. The same numbers: VCVTPS2DQ rounds to nearest even,
    // as lrintf does.
    __m512 top = _mm512_setzero_ps();
    for (int64_t k = 0; k < count; k += 16) {
      const __mmask16 m = count - k >= 16 ? __mmask16(0xffff) : __mmask16(0xff);
      top = _mm512_max_ps(top, _mm512_abs_ps(_mm512_maskz_loadu_ps(m, in + k)));
    }
    amax = _mm512_reduce_max_ps(top);
#else
    for (int64_t k = 0; k < count; ++k) amax = std::max(amax, std::fabs(in[k]));
#endif
    const float step = amax / kInt4ActivationLevels,
                inv = amax > 0.0f ? kInt4ActivationLevels / amax : 0.0f;
#if defined(__AVX512F__)
    // Two words a vector: lane o of a word takes input o / 2 + 4 (o % 2), the pairs (j, j + 4).
    const __m512i pairs = _mm512_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15);
    __m512i sum = _mm512_setzero_si512();
    for (; u + 2 <= v1; u += 2) {
      __m512i qv = _mm512_cvtps_epi32(
          _mm512_mul_ps(_mm512_loadu_ps(in + 8 * (u - v0)), _mm512_set1_ps(inv)));
      const __m512i levels = _mm512_set1_epi32(int32_t(kInt4ActivationLevels));
      qv = _mm512_max_epi32(_mm512_min_epi32(qv, levels),
                            _mm512_sub_epi32(_mm512_setzero_si512(), levels));
      sum = _mm512_add_epi32(sum, qv);
      if (kSplitBytes && p.split) {
        // l: the low byte, signed; h = (q - l) / 256. Bytes 0-15 of the pair of h, 16-31 of l,
        // then each word's 16 in split_byte's order.
        alignas(32) static constexpr uint8_t kOrder[32] = {
            0, 2,  4,  6,  16, 18, 20, 22, 1, 3,  5,  7,  17, 19, 21, 23,
            8, 10, 12, 14, 24, 26, 28, 30, 9, 11, 13, 15, 25, 27, 29, 31};
        const __m512i l = _mm512_srai_epi32(_mm512_slli_epi32(qv, 24), 24);
        const __m512i h = _mm512_srai_epi32(_mm512_sub_epi32(qv, l), 8);
        const __m256i hl = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm512_cvtepi32_epi8(h)),
                                                   _mm512_cvtepi32_epi8(l), 1);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 8 * u),
                            _mm256_permutexvar_epi8(
                                _mm256_load_si256(reinterpret_cast<const __m256i*>(kOrder)), hl));
      } else {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 8 * u),
                            _mm512_cvtepi32_epi16(_mm512_permutexvar_epi32(pairs, qv)));
      }
    }
    total = _mm512_reduce_add_epi32(sum);
#endif
    for (; u < v1; ++u)
      for (int j = 0; j < 8; ++j) {
        const int32_t lv = int32_t(kInt4ActivationLevels);
        const int32_t qv = std::clamp(int32_t(std::lrintf(in[8 * (u - v0) + j] * inv)), -lv, lv);
        if (p.split) {
          const int8_t l = int8_t(qv & 0xff), h = int8_t((qv - l) / 256);
          int8_t* b = reinterpret_cast<int8_t*>(q + 8 * u);
          b[split_byte(j, false)] = h;
          b[split_byte(j, true)] = l;
        } else {
          q[8 * u + 2 * (j % 4) + j / 4] = int16_t(qv);
        }
        total += qv;
      }
    *steps++ = step;
    *sums++ = step * float(total);
  });
}

struct Args {
  const Int4WeightView* w;
  Int16X x;
  const float* bias;
  float* out;
};

#if defined(__AVX512F__)
constexpr int kMaxTileRows = 8;  // x rows per tile: one accumulator of 16 lanes each

// acc + the products of w's and x's 16-bit pairs, summed per pair: VPDPWSSD with AVX512-VNNI,
// VPMADDWD and VPADDD without.
inline __m512i madd_pairs(__m512i acc, __m512i w, __m512i x) {
#if defined(__AVX512VNNI__)
  return _mm512_dpwssd_epi32(acc, w, x);
#else
  return _mm512_add_epi32(acc, _mm512_madd_epi16(w, x));
#endif
}

// The block of rows [r, r + 16) (one vector) times x rows [i, i + XR). Prefetch: this pass reads
// the weights from DRAM. With one or two x rows each row keeps 4 / 2 chains of sums, one per
// plane, so that no chain waits on its own latency.
template <int XR, bool Prefetch, bool Split>
__attribute__((noinline)) void tile(const Args& a, int64_t r, int64_t i) {
  const Int4WeightView& w = *a.w;
  const int64_t width = int4_block_width(w.rows, r);
  const uint32_t* qw = w.qweight + r * w.words;
  const uint16_t* scales = w.scales + r * w.groups;
  const uint8_t* zeros = w.zeros + r * w.groups;
  const __mmask16 m = __mmask16((1u << width) - 1);
  const bool full = width == kInt4Block;
  const __m512i low4 = _mm512_set1_epi32(0x000f000f);
  // Chains of sums: with pairs one per plane for one or two x rows; split bytes need two (h, l),
  // four for one or two x rows.
  constexpr int A = Split ? (XR <= 2 ? 4 : 2) : XR == 1 ? 4 : XR == 2 ? 2 : 1;
  const int16_t* xq[XR];
  for (int j = 0; j < XR; ++j) xq[j] = a.x.q + (i + j) * a.x.kp;
  const float* steps = a.x.steps + i * a.x.segments;
  const float* sums = a.x.sums + i * a.x.segments;
  __m512 out[XR];
  for (int j = 0; j < XR; ++j) out[j] = _mm512_setzero_ps();
  int4::for_each_segment(w, [&](int64_t g, int64_t v0, int64_t v1) {
    __m512i acc[A][XR];
    for (int c = 0; c < A; ++c)
      for (int j = 0; j < XR; ++j) acc[c][j] = _mm512_setzero_si512();
    const auto load = [&](int64_t u) {
      if constexpr (Prefetch) __builtin_prefetch(qw + u * width + int4::kPrefetchWords, 0, 2);
      return full ? _mm512_loadu_si512(qw + u * width)
                  : _mm512_maskz_loadu_epi32(m, qw + u * width);
    };
    if constexpr (Split) {
      // acc[c][j] takes h's products (times 256 at the end), acc[c + 1][j] l's; with one or two
      // x rows the even and odd planes keep chains of their own (c = 0 or 2).
      const __m512i low4b = _mm512_set1_epi8(0x0f);
      constexpr int P = A > 2 ? 2 : 1;
      for (int64_t u = v0; u < v1; ++u) {
        const __m512i words = load(u);
        const __m512i plane[2] = {_mm512_and_si512(words, low4b),
                                  _mm512_and_si512(_mm512_srli_epi32(words, 4), low4b)};
        for (int p = 0; p < 2; ++p)
          for (int j = 0; j < XR; ++j) {
            int32_t h, l;
            std::memcpy(&h, xq[j] + 8 * u + 4 * p, 4);
            std::memcpy(&l, xq[j] + 8 * u + 4 * p + 2, 4);
            const int c = 2 * (p % P);
            acc[c][j] = _mm512_dpbusd_epi32(acc[c][j], plane[p], _mm512_set1_epi32(h));
            acc[c + 1][j] = _mm512_dpbusd_epi32(acc[c + 1][j], plane[p], _mm512_set1_epi32(l));
          }
      }
    } else {
      for (int64_t u = v0; u < v1; ++u) {
        const __m512i words = load(u);
        for (int b = 0; b < 4; ++b) {
          const __m512i plane = _mm512_and_si512(b ? _mm512_srli_epi32(words, 4 * b) : words, low4);
          for (int j = 0; j < XR; ++j) {
            int32_t pair;
            std::memcpy(&pair, xq[j] + 8 * u + 2 * b, 4);
            acc[b % A][j] = madd_pairs(acc[b % A][j], plane, _mm512_set1_epi32(pair));
          }
        }
      }
    }
    __m512 sum[XR];
    for (int j = 0; j < XR; ++j) {
      __m512i t;
      if constexpr (Split) {
        __m512i h = acc[0][j], l = acc[1][j];
        if constexpr (A > 2) h = _mm512_add_epi32(h, acc[2][j]), l = _mm512_add_epi32(l, acc[3][j]);
        t = _mm512_add_epi32(_mm512_slli_epi32(h, 8), l);
      } else {
        t = acc[0][j];
        for (int c = 1; c < A; ++c) t = _mm512_add_epi32(t, acc[c][j]);
      }
      sum[j] = _mm512_mul_ps(_mm512_cvtepi32_ps(t), _mm512_set1_ps(steps[j * a.x.segments]));
    }
    ++steps;
    int4::add_segment<XR>(scales, zeros, g, width, m, sum, sums++, a.x.segments, out);
  });
  int4::store_block<XR>(out, a.bias, m, r, i, w.rows, a.out);
}

#else
constexpr int kMaxTileRows = 2;

// The block of rows [r, r + 16) (two vectors of 8 lanes) times x rows [i, i + XR). Prefetch: this
// pass reads the weights from DRAM. (No split layout without VNNI.)
template <int XR, bool Prefetch, bool Split>
__attribute__((noinline)) void tile(const Args& a, int64_t r, int64_t i) {
  static_assert(!Split);
  const Int4WeightView& w = *a.w;
  const int64_t width = int4_block_width(w.rows, r);
  const uint32_t* qw = w.qweight + r * w.words;
  const __m256i m[2] = {vec::first_lanes(int(width)), vec::first_lanes(int(width - 8))};
  const bool full = width == kInt4Block;
  const __m256i low4 = _mm256_set1_epi32(0x000f000f);
  const int16_t* xq[XR];
  for (int j = 0; j < XR; ++j) xq[j] = a.x.q + (i + j) * a.x.kp;
  const float* steps = a.x.steps + i * a.x.segments;
  const float* sums = a.x.sums + i * a.x.segments;
  __m256 out[XR][2];
  for (int j = 0; j < XR; ++j) out[j][0] = out[j][1] = _mm256_setzero_ps();
  int4::for_each_segment(w, [&](int64_t g, int64_t v0, int64_t v1) {
    __m256i acc[XR][2];
    for (int j = 0; j < XR; ++j) acc[j][0] = acc[j][1] = _mm256_setzero_si256();
    for (int64_t u = v0; u < v1; ++u) {
      if constexpr (Prefetch) __builtin_prefetch(qw + u * width + int4::kPrefetchWords, 0, 2);
      __m256i words[2];
      if (full)
        int4::load_words<true>(qw, u, width, m, words);
      else
        int4::load_words<false>(qw, u, width, m, words);
      for (int b = 0; b < 4; ++b) {
        __m256i plane[2];
        for (int h = 0; h < 2; ++h)
          plane[h] = _mm256_and_si256(b ? _mm256_srli_epi32(words[h], 4 * b) : words[h], low4);
        for (int j = 0; j < XR; ++j) {
          int32_t pair;
          std::memcpy(&pair, xq[j] + 8 * u + 2 * b, 4);
          const __m256i xp = _mm256_set1_epi32(pair);
          for (int h = 0; h < 2; ++h)
            acc[j][h] = _mm256_add_epi32(acc[j][h], _mm256_madd_epi16(plane[h], xp));
        }
      }
    }
    __m256 sum[XR][2];
    for (int j = 0; j < XR; ++j)
      for (int h = 0; h < 2; ++h)
        sum[j][h] =
            _mm256_mul_ps(_mm256_cvtepi32_ps(acc[j][h]), _mm256_set1_ps(steps[j * a.x.segments]));
    ++steps;
    int4::add_segment<XR>(w.scales + r * w.groups, w.zeros + r * w.groups, g, width, sum, sums++,
                          a.x.segments, out);
  });
  int4::store_block<XR>(out, a.bias, m, r, i, w.rows, a.out);
}
#endif

template <int XR>
void tile_at(const Args& a, int64_t r, int64_t i, bool prefetch) {
  if constexpr (kSplitBytes && XR <= kSplitMaxRows)
    if (a.x.split) return prefetch ? tile<XR, true, true>(a, r, i) : tile<XR, false, true>(a, r, i);
  prefetch ? tile<XR, true, false>(a, r, i) : tile<XR, false, false>(a, r, i);
}

}  // namespace

bool matmul_int4_gemv_int16(const float* x, int64_t n, std::span<const Int4Target> targets,
                            const MatmulOptions& opt) {
  int64_t weights = 0;
  for (const Int4Target& t : targets) weights += t.w.rows * t.w.words * 8;
  const int nt = threads_for(opt.threads, weights, kGrain);
  // The targets read x alike: it is quantized by the layout of the first. Up to kOwnX rows every
  // thread quantizes x for itself, and starts on its rows without waiting for the others: a
  // decode step's GEMVs are short (~50 us a call for the 0.5B), and one thread quantizing while
  // the other waited at the barrier took 7-15% of the AWQ pass (qmpi_kernel_bench --int4 awq --rows
  // 1).
  constexpr int64_t kOwnX = 2;
  const Int4WeightView& w0 = targets[0].w;
  const bool own = n <= kOwnX;
  const Int16X shared = own ? Int16X{} : alloc_int16_x(n, w0);
  const Biases biases = widen_biases(targets);
#pragma omp parallel num_threads(nt)
  {
    Int16X mine;
    if (own) {
      mine = alloc_int16_x(n, w0);
      for (int64_t i = 0; i < n; ++i) quantize_row(x, i, w0, mine);
    } else {
#pragma omp for schedule(static)
      for (int64_t i = 0; i < n; ++i) quantize_row(x, i, w0, shared);
    }
    const Int16X& xq = own ? mine : shared;
    for_each_share(targets, kInt4Block, nullptr, [&](size_t k, int64_t begin, int64_t end) {
      const Args a{&targets[k].w, xq, biases[k].get(), targets[k].out};
      for (int64_t r = begin; r < end; r += kInt4Block) {
        int64_t i = 0;
        if constexpr (kMaxTileRows == 8) {
          for (; i + 8 <= n; i += 8) tile_at<8>(a, r, i, i == 0);
          for (; i + 4 <= n; i += 4) tile_at<4>(a, r, i, i == 0);
          if (i + 3 == n) tile_at<3>(a, r, i, i == 0), i += 3;
        }
        for (; i + 2 <= n; i += 2) tile_at<2>(a, r, i, i == 0);
        for (; i < n; ++i) tile_at<1>(a, r, i, i == 0);
      }
    });
  }
  return true;
}

#else

bool matmul_int4_gemv_int16(const float*, int64_t, std::span<const Int4Target>,
                            const MatmulOptions&) {
  return false;
}

#endif

}  // namespace qmpi::cpu
