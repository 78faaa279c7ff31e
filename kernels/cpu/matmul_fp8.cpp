// The FP8 matmul's checks, reference and decode GEMV. The GEMV gives each thread a contiguous
// run of weight rows (of all targets of a group, end to end), taken 4 at a time as in the bf16
// GEMV, block row by block row: x is multiplied by the block row's scales once (scale_x), so a
// row's codes are only decoded in registers, 2 vectors at a time (e4m3_simd.h), and multiplied
// with up to 4 rows of x. The first pass over a tile prefetches its rows ahead into L2; later
// passes find them in L1.
#include "kernels/cpu/matmul_fp8.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <string>

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

// Rows [r, r + R) times all n rows of x; only the first pass (the one that reads the rows from
// DRAM) prefetches.
template <int R>
void tile_rows(const Fp8WeightView& w, int64_t r, const float* xs, int64_t Kp, int64_t n,
               const float* bias, float* out) {
  for (int64_t t0 = 0; t0 < n; t0 += kTokens) {
    const bool first = t0 == 0;
    switch (std::min<int64_t>(kTokens, n - t0)) {
      case 4:
        if constexpr (kTokens >= 4)
          first ? tile<R, 4, true>(w, r, xs, Kp, t0, bias, out)
                : tile<R, 4, false>(w, r, xs, Kp, t0, bias, out);
        break;
      case 3:
        if constexpr (kTokens >= 3)
          first ? tile<R, 3, true>(w, r, xs, Kp, t0, bias, out)
                : tile<R, 3, false>(w, r, xs, Kp, t0, bias, out);
        break;
      case 2:
        first ? tile<R, 2, true>(w, r, xs, Kp, t0, bias, out)
              : tile<R, 2, false>(w, r, xs, Kp, t0, bias, out);
        break;
      default:
        first ? tile<R, 1, true>(w, r, xs, Kp, t0, bias, out)
              : tile<R, 1, false>(w, r, xs, Kp, t0, bias, out);
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
// row by block row, x scaled once for each.
void gemv(const float* x, int64_t n, std::span<const Fp8Target> ts, const MatmulOptions& opt) {
  const int nt = threads_for(opt.threads, total_elements(ts), kGrain);
  const Biases b = widen_biases(ts);
  const int64_t Kp = (ts[0].w.cols + kStep - 1) / kStep * kStep;
#pragma omp parallel num_threads(nt)
  {
    float* xs = thread_scratch<float, 3>(size_t(n * Kp));
    for_each_share(ts, kRows, omp_get_thread_num(), omp_get_num_threads(),
                   [&](size_t i, int64_t first, int64_t last) {
                     const Fp8WeightView& w = ts[i].w;
                     for (int64_t begin = first; begin < last;) {
                       const int64_t block_row = (begin + w.row_offset) / w.block_n;
                       const int64_t end =
                           std::min(last, (block_row + 1) * w.block_n - w.row_offset);
                       scale_x(w, block_row, x, n, xs, Kp);
                       int64_t r = begin;
                       for (; r + kRows <= end; r += kRows)
                         tile_rows<kRows>(w, r, xs, Kp, n, b[i].get(), ts[i].out);
                       for (; r < end; ++r) tile_rows<1>(w, r, xs, Kp, n, b[i].get(), ts[i].out);
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
  if (n <= kGemvMaxRows && alike) return gemv(x, n, targets, opt);
  for (const Fp8Target& t : targets)
    if (n <= kGemvMaxRows)
      gemv(x, n, {&t, 1}, opt);
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
