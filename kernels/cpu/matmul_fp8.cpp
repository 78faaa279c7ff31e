// The FP8 matmul's checks, reference and decode GEMV. The GEMV gives each thread a contiguous
// run of weight rows (of all targets of a group, end to end), taken 4 at a time as in the bf16
// GEMV, block row by block row: x is multiplied by the block row's scales once (scale_x), so a
// row's codes are only decoded in registers, 2 vectors at a time (e4m3_simd.h), and multiplied
// with up to 4 rows of x; with bf16 activations and VDPBF16PS, up to 3 rows of x rounded to bf16
// take decoded bf16 codes instead (tile_bf16). The first pass over a tile prefetches its rows
// ahead into L2; later passes find them in L1.
#include "kernels/cpu/matmul_fp8.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <string>
#include <type_traits>

#include "core/errors.h"
#include "kernels/cpu/aligned.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/dot_products.h"
#include "kernels/cpu/e4m3_simd.h"
#include "kernels/cpu/matmul_targets.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/scratch.h"
#include "kernels/cpu/vec.h"
#include "kernels/cpu/x86.h"

namespace qmpi::cpu {
namespace {

// Below this many weights per thread, extra threads cost more than they bring.
constexpr int64_t kGrain = 64 * 1024;
// Weight rows per tile and rows of x per pass over them: 4 x 4 accumulators (4 x 3 in AVX2's
// 16 registers, x read as the FMAs' memory operands: 12 rows of x took 84-91 ms a pass over the
// 0.5B's projections in passes of 2 rows, 76-78 in passes of 3, 84 of 4, which spill), and the
// tile's 4 rows (at most 4 x 4864 bytes) stay in L1 for the passes after the first.
constexpr int kRows = 4;
// Decode (one row of x, bf16) takes 8 weight rows a tile, 2 x 8 chains and 8 totals: eight
// streams of codes in flight instead of four read the 0.5B's projections 5-7% faster
// (qmpi_kernel_bench --fp8 --rows 1 --bf16-activations, 2 threads, Zen 5, 4 alternating rounds:
// 9.67-9.82 -> 9.02-9.40 ms a pass; 12 rows, one set of chains: 10.3-10.5).
constexpr int kRowsBf16One = 8;
#if defined(__AVX512F__)
constexpr int kTokens = 4;
constexpr int64_t kStep = 2 * vec::kLanes;  // codes per row per inner step
// The decoded values are the codes' times 2^-8; x carries the 2^8.
constexpr float kXFactor = 0x1p8f, kOutFactor = 1.0f;
inline E4m3Pair load_codes(const uint8_t* p) {
  return e4m3_load(p);
}
inline E4m3Pair load_codes_first(const uint8_t* p, int n) {
  return e4m3_load_first(p, n);
}
#elif defined(QMPI_CPU_VEC)
constexpr int kTokens = 3;
constexpr int64_t kStep = 2 * vec::kLanes;
// The decoded values are the codes' times 2^-120, split between x (2^75) and the sum (2^45):
// products of normal codes stay normal floats unless |x * scale| < 2^-75, and x * scale * 2^75
// overflows only past 2^53. Scaling by powers of 2 is exact, so the products are those of the
// other routes.
static_assert(kE4m3RawExponent == 120);
constexpr float kXFactor = 0x1p75f, kOutFactor = 0x1p45f;
inline E4m3Pair load_codes(const uint8_t* p) {
  return e4m3_load_raw(p);
}
inline E4m3Pair load_codes_first(const uint8_t* p, int n) {
  return e4m3_load_raw_first(p, n);
}
#else
constexpr int kTokens = 4;
constexpr int64_t kStep = 32;
constexpr float kXFactor = 1.0f, kOutFactor = 1.0f;  // the table's values are exact
#endif

// x for the rows of one block row of the weight: every input times its column block's scale
// and kXFactor, row stride Kp (K rounded up to kStep, zeros past K). With the scale in x, the
// inner loop only decodes and multiplies, whatever the block width.
void scale_x(const Fp8WeightView& w, int64_t block_row, const float* x, int64_t n, float* xs,
             int64_t Kp) {
  const float* srow = w.scales + block_row * w.scale_cols;
  for (int64_t t = 0; t < n; ++t) {
    const float* src = x + t * w.cols;
    float* dst = xs + t * Kp;
    for (int64_t k = 0, blk = 0; k < w.cols; ++blk) {
      const int64_t end = std::min(w.cols, (blk + 1) * w.block_k - w.col_offset);
      const float s = srow[blk] * kXFactor;
      for (; k < end; ++k) dst[k] = src[k] * s;
    }
    std::fill(dst + w.cols, dst + Kp, 0.0f);
  }
}

#if defined(QMPI_CPU_VEC)

// How far ahead of each row's reads the first pass prefetches, into L2: as in the bf16 GEMV
// (matmul_gemv.cpp), one core keeps too few misses in flight on its own to reach DRAM bandwidth.
// Without it this GEMV stalled on every load of codes and read 0.95 GB per CPU-second.
constexpr int64_t kPrefetchBytes = 16 * 1024;

// Rows [r, r + R) of one block row times rows [t0, t0 + T) of the scaled x (row stride Kp).
// With `Ahead` each row's line kPrefetchBytes on is asked for once per 64 codes.
template <int R, int T, bool Ahead>
void tile(const Fp8WeightView& w, int64_t r, const float* xs, int64_t Kp, int64_t t0,
          const float* bias, float* out) {
  const uint8_t* q[R];
  for (int i = 0; i < R; ++i) q[i] = w.q + (r + i) * w.cols;
  const float* xt = xs + t0 * Kp;
  // With one row of x the R accumulators alone would each take both FMAs of a step, and a step
  // would wait on FMA latency (2 x 4 cycles per 4 rows' 2 x kLanes codes, measured as the FP8
  // GEMV's ceiling on AVX2): the two halves of a step go to two sets, summed at the end.
  constexpr int A = T == 1 ? 2 : 1;
  vec::F acc[A][R][T];
  for (int a = 0; a < A; ++a)
    for (int i = 0; i < R; ++i)
      for (int t = 0; t < T; ++t) acc[a][i][t] = vec::zero();
  const auto step = [&](int64_t k, int64_t n) {
    for (int i = 0; i < R; ++i) {
      const E4m3Pair wv = n < kStep ? load_codes_first(q[i] + k, int(n)) : load_codes(q[i] + k);
      for (int t = 0; t < T; ++t) {
        acc[0][i][t] = vec::fma(wv.lo, vec::load(xt + t * Kp + k), acc[0][i][t]);
        acc[A - 1][i][t] =
            vec::fma(wv.hi, vec::load(xt + t * Kp + k + vec::kLanes), acc[A - 1][i][t]);
      }
    }
  };
  int64_t k = 0;
  for (; k + 64 <= w.cols; k += 64) {
    if (Ahead)
      for (int i = 0; i < R; ++i) __builtin_prefetch(q[i] + k + kPrefetchBytes, 0, 2);
    for (int64_t j = 0; j < 64; j += kStep) step(k + j, kStep);
  }
  for (; k < w.cols; k += kStep) step(k, std::min(kStep, w.cols - k));
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < R; ++i)
      out[(t0 + t) * w.rows + r + i] =
          vec::sum(A == 1 ? acc[0][i][t] : vec::add(acc[0][i][t], acc[A - 1][i][t])) * kOutFactor +
          (bias ? bias[r + i] : 0.0f);
}

#else  // portable: the table, one element at a time

template <int R, int T, bool Ahead>
void tile(const Fp8WeightView& w, int64_t r, const float* xs, int64_t Kp, int64_t t0,
          const float* bias, float* out) {
  const float* lut = e4m3_table();
  for (int i = 0; i < R; ++i) {
    const uint8_t* q = w.q + (r + i) * w.cols;
    for (int t = 0; t < T; ++t) {
      const float* xt = xs + (t0 + t) * Kp;
      float acc = 0.0f;
      for (int64_t k = 0; k < w.cols; ++k) acc += lut[q[k]] * xt[k];
      out[(t0 + t) * w.rows + r + i] = acc * kOutFactor + (bias ? bias[r + i] : 0.0f);
    }
  }
}

#endif

// Codes per step of the bf16 route (below).
constexpr int64_t kStepBf16 = 64;

// Whether a weight's scale blocks start on 64-code steps (every Qwen FP8 checkpoint's 128 x 128
// blocks, unless a TP slice starts mid-step): each step then lies in one block.
bool steps_in_blocks(const Fp8WeightView& w) {
  return w.block_k % kStepBf16 == 0 && w.col_offset % kStepBf16 == 0;
}

#if defined(__AVX512BF16__)
// The GEMV with bf16 activations where VDPBF16PS exists: 64 codes a step become two vectors of
// bf16 (E4m3Bf16Decoder) that VDPBF16PS multiplies with x's bf16 pairs, 32 products an
// instruction; each scale block's sums are then scaled, as in the blocked path, so the products
// are those of x rounded to bf16. The float route above spends ~4 operations per 16 codes on the
// decode: on an AVX512-BF16 EPYC it read the 0.5B's projections at 28-29 GB/s where the bf16 GEMV
// reads 42-45, this one at 42-45 (qmpi_kernel_bench --fp8 --rows 1 --bf16-activations, 2
// threads: 12.4-12.9 -> 8.0-8.5 ms).
constexpr bool kHaveBf16Gemv = true;
constexpr int64_t kBf16GemvMaxRows = 3;

// Rows of x as bf16 (row stride Kp, a multiple of 64, zeros past cols), each 64 columns in the
// order E4m3Bf16Decoder leaves the codes (e4m3_simd.h).
void pack_x_bf16(const float* x, int64_t n, int64_t cols, int64_t Kp, uint16_t* xb) {
  alignas(64) static constexpr uint16_t kFirst[32] = {0,  1,  2,  3,  4,  5,  6,  7,  16, 17, 18,
                                                      19, 20, 21, 22, 23, 32, 33, 34, 35, 36, 37,
                                                      38, 39, 48, 49, 50, 51, 52, 53, 54, 55};
  const __m512i first = _mm512_load_si512(kFirst);
  const __m512i second = _mm512_add_epi16(first, _mm512_set1_epi16(8));
  for (int64_t t = 0; t < n; ++t)
    for (int64_t k = 0; k < Kp; k += kStepBf16) {
      __m512 f[4];
      for (int j = 0; j < 4; ++j) {
        const int64_t left = std::clamp<int64_t>(cols - k - 16 * j, 0, 16);
        f[j] = _mm512_maskz_loadu_ps(__mmask16((1u << left) - 1), x + t * cols + k + 16 * j);
      }
      const __m512i a = __m512i(_mm512_cvtne2ps_pbh(f[1], f[0]));
      const __m512i b = __m512i(_mm512_cvtne2ps_pbh(f[3], f[2]));
      _mm512_store_si512(xb + t * Kp + k,
                         kE4m3Bf16Interleaved ? _mm512_permutex2var_epi16(a, first, b) : a);
      _mm512_store_si512(xb + t * Kp + k + 32,
                         kE4m3Bf16Interleaved ? _mm512_permutex2var_epi16(a, second, b) : b);
    }
}

// tile() for bf16 x packed by pack_x_bf16 (row stride Kp); rows [r, r + R) lie in one block row.
template <int R, int T, bool Ahead>
void tile_bf16(const Fp8WeightView& w, int64_t r, const uint16_t* xb, int64_t Kp, int64_t t0,
               const float* bias, float* out) {
  const E4m3Bf16Decoder decode;
  const float* scales = w.scales + (r + w.row_offset) / w.block_n * w.scale_cols;
  const uint8_t* q[R];
  for (int i = 0; i < R; ++i) q[i] = w.q + (r + i) * w.cols;
  const uint16_t* xt = xb + t0 * Kp;
  constexpr int A = T == 1 ? 2 : 1;  // as in tile(): one row of x keeps two sets of chains
  __m512 total[R][T], acc[A][R][T];
  for (int i = 0; i < R; ++i)
    for (int t = 0; t < T; ++t) total[i][t] = _mm512_setzero_ps();
  const auto step = [&](int64_t k, int64_t n) {
    for (int i = 0; i < R; ++i) {
      const __m512i c = n < kStepBf16 ? _mm512_maskz_loadu_epi8((__mmask64(1) << n) - 1, q[i] + k)
                                      : _mm512_loadu_si512(q[i] + k);
      __m512i first, second;
      decode(c, first, second);
      for (int t = 0; t < T; ++t) {
        const uint16_t* x = xt + t * Kp + k;
        acc[0][i][t] =
            _mm512_dpbf16_ps(acc[0][i][t], (__m512bh)first, (__m512bh)_mm512_load_si512(x));
        acc[A - 1][i][t] = _mm512_dpbf16_ps(acc[A - 1][i][t], (__m512bh)second,
                                            (__m512bh)_mm512_load_si512(x + 32));
      }
    }
  };
  for (int64_t k = 0, blk = 0; k < w.cols; ++blk) {
    const int64_t end = std::min(w.cols, (blk + 1) * w.block_k - w.col_offset);
    for (int a = 0; a < A; ++a)
      for (int i = 0; i < R; ++i)
        for (int t = 0; t < T; ++t) acc[a][i][t] = _mm512_setzero_ps();
    for (; k < end; k += kStepBf16) {
      if (Ahead)
        for (int i = 0; i < R; ++i) __builtin_prefetch(q[i] + k + kPrefetchBytes, 0, 2);
      step(k, std::min(kStepBf16, end - k));
    }
    // The codes' 2^-8 is the scale's.
    const __m512 s = _mm512_set1_ps(scales[blk] * 0x1p8f);
    for (int i = 0; i < R; ++i)
      for (int t = 0; t < T; ++t)
        total[i][t] = _mm512_fmadd_ps(
            A == 1 ? acc[0][i][t] : _mm512_add_ps(acc[0][i][t], acc[A - 1][i][t]), s, total[i][t]);
  }
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < R; ++i)
      out[(t0 + t) * w.rows + r + i] =
          _mm512_reduce_add_ps(total[i][t]) + (bias ? bias[r + i] : 0.0f);
}
#else
constexpr bool kHaveBf16Gemv = false;
constexpr int64_t kBf16GemvMaxRows = 0;
inline void pack_x_bf16(const float*, int64_t, int64_t, int64_t, uint16_t*) {}
template <int R, int T, bool Ahead>
void tile_bf16(const Fp8WeightView&, int64_t, const uint16_t*, int64_t, int64_t, const float*,
               float*) {}
#endif

// Rows [r, r + R) times all n rows of x (float, or bf16 packed by pack_x_bf16); only the first
// pass (the one that reads the rows from DRAM) prefetches.
template <int R, class X>
void tile_rows(const Fp8WeightView& w, int64_t r, const X* xs, int64_t Kp, int64_t n,
               const float* bias, float* out) {
  const auto run = [&]<int T>(int64_t t0) {
    const bool first = t0 == 0;
    if constexpr (std::is_same_v<X, uint16_t>)
      first ? tile_bf16<R, T, true>(w, r, xs, Kp, t0, bias, out)
            : tile_bf16<R, T, false>(w, r, xs, Kp, t0, bias, out);
    else
      first ? tile<R, T, true>(w, r, xs, Kp, t0, bias, out)
            : tile<R, T, false>(w, r, xs, Kp, t0, bias, out);
  };
  // The bf16 tile keeps a block's sums beside the totals: 2 rows of x at a time fill AVX-512's 32
  // registers.
  constexpr int64_t tokens = std::is_same_v<X, uint16_t> ? 2 : kTokens;
  for (int64_t t0 = 0; t0 < n; t0 += tokens) {
    switch (std::min<int64_t>(tokens, n - t0)) {
      case 4:
        if constexpr (tokens >= 4) run.template operator()<4>(t0);
        break;
      case 3:
        if constexpr (tokens >= 3) run.template operator()<3>(t0);
        break;
      case 2:
        run.template operator()<2>(t0);
        break;
      default:
        run.template operator()<1>(t0);
        break;
    }
  }
}

void check(const Fp8WeightView& w, const WeightView* bias) {
  const bool grid_ok = w.block_n > 0 && w.block_k > 0 && w.row_offset >= 0 &&
                       w.row_offset < w.block_n && w.col_offset >= 0 && w.col_offset < w.block_k &&
                       w.scale_rows * w.block_n >= w.rows + w.row_offset &&
                       w.scale_cols * w.block_k >= w.cols + w.col_offset;
  if (!w.q || !w.scales || !grid_ok)
    raise(Err::Internal, "fp8 matmul weight of " + std::to_string(w.rows) + "x" +
                             std::to_string(w.cols) + " with " + std::to_string(w.scale_rows) +
                             "x" + std::to_string(w.scale_cols) + " scales of blocks " +
                             std::to_string(w.block_n) + "x" + std::to_string(w.block_k) +
                             " does not describe its block grid");
  if (bias && (!is_float_weight(bias->dtype) || bias->rows * bias->cols != w.rows))
    raise(Err::TensorShapeMismatch,
          "fp8 matmul bias has " + std::to_string(bias->rows * bias->cols) +
              " elements for a weight with " + std::to_string(w.rows) + " output rows");
}

// The GEMV over a group of targets of the same width: each thread's share of their rows, block
// row by block row, x scaled once for each; with `bf16`, x rounded to bf16 once for all.
void gemv(const float* x, int64_t n, std::span<const Fp8Target> ts, const MatmulOptions& opt,
          bool bf16 = false) {
  const int nt = threads_for(opt.threads, total_elements(ts), kGrain);
  const Biases b = widen_biases(ts);
  const int64_t cols = ts[0].w.cols, step = bf16 ? kStepBf16 : kStep;
  const int64_t Kp = (cols + step - 1) / step * step;
  uint16_t* xb = bf16 ? thread_scratch<uint16_t, 5>(size_t(n * Kp)) : nullptr;
  if (bf16) pack_x_bf16(x, n, cols, Kp, xb);
  std::atomic<int64_t> next{0};
#pragma omp parallel num_threads(nt)
  {
    float* xs = bf16 ? nullptr : thread_scratch<float, 3>(size_t(n * Kp));
    const bool one = bf16 && n == 1;
    const int64_t quantum = one ? kRowsBf16One : kRows;
    for_each_share(ts, quantum, &next, [&](size_t i, int64_t first, int64_t last) {
      const Fp8WeightView& w = ts[i].w;
      const auto rows = [&]<class X>(const X* xr, int64_t begin, int64_t end) {
        int64_t r = begin;
        if constexpr (std::is_same_v<X, uint16_t>)
          for (; one && r + kRowsBf16One <= end; r += kRowsBf16One)
            tile_bf16<kRowsBf16One, 1, true>(w, r, xr, Kp, 0, b[i].get(), ts[i].out);
        for (; r + kRows <= end; r += kRows)
          tile_rows<kRows>(w, r, xr, Kp, n, b[i].get(), ts[i].out);
        for (; r < end; ++r) tile_rows<1>(w, r, xr, Kp, n, b[i].get(), ts[i].out);
      };
      for (int64_t begin = first; begin < last;) {
        const int64_t block_row = (begin + w.row_offset) / w.block_n;
        const int64_t end = std::min(last, (block_row + 1) * w.block_n - w.row_offset);
        if (bf16) {
          rows(static_cast<const uint16_t*>(xb), begin, end);
        } else {
          scale_x(w, block_row, x, n, xs, Kp);
          rows(static_cast<const float*>(xs), begin, end);
        }
        begin = end;
      }
    });
  }
}

}  // namespace

const float* e4m3_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int i = 0; i < 256; ++i) t[size_t(i)] = e4m3_to_f32(uint8_t(i));
    return t;
  }();
  return table.data();
}

void matmul_fp8(const float* x, int64_t n, const Fp8WeightView& w, const WeightView* bias,
                float* out, const MatmulOptions& opt) {
  const Fp8Target t{w, bias, out};
  matmul_fp8_group(x, n, {&t, 1}, opt);
}

void matmul_fp8_group(const float* x, int64_t n, std::span<const Fp8Target> targets,
                      const MatmulOptions& opt) {
  bool alike = true;
  for (const Fp8Target& t : targets) {
    check(t.w, t.bias);
    alike = alike && t.w.cols == targets[0].w.cols;
  }
  if (n <= 0 || targets.empty()) return;
  // With bf16 activations the bf16 tiles overtake the GEMV from 12 rows, later than for bf16
  // weights (the FP8 GEMV reads half the bytes): CPU time of 6 layers' projections at 1 thread,
  // GEMV against tiles, 8 rows 12.4 / 15.2 ms, 10 rows 15.9 / 15.9, 12 rows 18.4 / 15.8. The
  // float32 tiles (no VDPBF16PS) do not, as for bf16 weights: the 0.5B's projections, 2 threads,
  // GEMV at 11 rows 84-91 ms a pass, tiles at 12 and 16 rows 112-128.
  constexpr int64_t kGemvMaxRowsFp8Bf16 = kHaveBf16Dot ? 11 : kGemvMaxRows;
  if (opt.bf16_activations && n > kGemvMaxRowsFp8Bf16 &&
      matmul_fp8_blocked_bf16(x, n, targets, opt))
    return;
  // The bf16 route decodes a tile's codes once per 2 rows of x (the float one per 4), so it
  // serves up to 3 rows: qmpi_kernel_bench --fp8 --bf16-activations, 0.5B projections, 2
  // threads, ms a pass, float / bf16 route: 1 row 12.4-12.9 / 8.4-8.5, 3 rows 18.3-18.5 /
  // 16.5-17.0, 4 rows 20.3-20.9 / 26.0-26.6.
  bool bf16_gemv = kHaveBf16Gemv && opt.bf16_activations && n <= kBf16GemvMaxRows;
  for (const Fp8Target& t : targets) bf16_gemv = bf16_gemv && steps_in_blocks(t.w);
  if (n <= kGemvMaxRows && alike) return gemv(x, n, targets, opt, bf16_gemv);
  for (const Fp8Target& t : targets)
    if (n <= kGemvMaxRows)
      gemv(x, n, {&t, 1}, opt, bf16_gemv);
    else
      matmul_fp8_blocked(x, n, t.w, t.bias, t.out, opt);
}

void matmul_fp8_gemv(const float* x, int64_t n, const Fp8WeightView& w, const WeightView* bias,
                     float* out, const MatmulOptions& opt) {
  const Fp8Target t{w, bias, out};
  gemv(x, n, {&t, 1}, opt);
}

void matmul_fp8_reference(const float* x, int64_t n, const Fp8WeightView& w, const WeightView* bias,
                          float* out) {
  const AlignedArray<float> b = widen(bias);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t r = 0; r < w.rows; ++r) {
      double s = 0.0;
      for (int64_t c = 0; c < w.cols; ++c)
        s += double(e4m3_to_f32(w.q[r * w.cols + c])) * double(fp8_scale(w, r, c)) *
             double(x[i * w.cols + c]);
      out[i * w.rows + r] = float(s + (b ? b[r] : 0.0f));
    }
}

}  // namespace qmpi::cpu
