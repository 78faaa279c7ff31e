// The decode-time matmul: every weight row is read from memory once and multiplied with all n
// rows of x while it sits in registers/L1, so the op runs at the machine's read bandwidth.
#include <omp.h>

#include <algorithm>

#include "kernels/cpu/aligned.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_targets.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/scratch.h"
#include "kernels/cpu/vec.h"
#include "kernels/cpu/x86.h"

namespace qmpi::cpu {
namespace {

// Weight rows handled together.
constexpr int kRows = 4;
// Decode (one row of x) takes 8 weight rows a tile: eight streams of weights in flight instead of
// four. qmpi_kernel_bench --rows 1 --huge-pages, 2 threads, Zen 5, 3 alternating rounds: the
// 0.5B's projections with --bf16-activations 14.3-15.2 -> 12.6-12.8 ms a pass (56 GB/s; 16
// rows 13.8-13.9), the exact path's whole pass 29.4-32.2 -> 27.0-28.0 ms.
constexpr int kRowsOne = 8;
// Below this many weight elements per thread, extra threads cost more than they bring.
constexpr int64_t kGrain = 32 * 1024;

#if defined(QMPI_CPU_VEC)
constexpr int64_t kStep = 2 * vec::kLanes;  // weights per row per inner step
// Rows of x per tile: 4 weight rows x 4 x-rows of accumulators fill AVX-512's 32 registers;
// AVX2 has 16, so 4 x 2 of them leave room for the x and weight vectors.
constexpr int kXRows = vec::kLanes == 16 ? 4 : 2;
// How far ahead of each weight load the GEMV prefetches, and into which cache. On the
// project's Zen 4 machine, with one thread, 16 KiB took a bf16 GEMV from ~70% to ~90% of the
// measured read bandwidth; prefetching into L2 (prefetcht1) rather than L1 (prefetcht0) then
// cut its CPU time per pass over a decode step's weights from ~91 ms to ~55 ms, the same bytes
// per CPU-second as a plain read (qmpi_kernel_bench, docs/perf.md). L1 has few miss buffers,
// so prefetcht0 requests queue behind each other; L2 keeps many more lines in flight, and the
// L2 -> L1 hop is hidden by the loads' own latency.
constexpr size_t kPrefetchBytes = 16 * 1024;
constexpr int kPrefetchLocality = 2;  // __builtin_prefetch's: 2 = prefetcht1 (L2)

// Each row of x, zero-padded to a multiple of kStep. For BF16 weights every block of kStep is
// stored as its even then its odd elements, the order vec::load_bf16_even_odd widens a block
// of weights in.
void pack_x(const float* x, int64_t n, int64_t K, DType wt, float* xp, int64_t Kp) {
  constexpr int64_t half = kStep / 2;
  for (int64_t i = 0; i < n; ++i) {
    const float* src = x + i * K;
    float* dst = xp + i * Kp;
    std::fill(dst, dst + Kp, 0.0f);
    if (wt != DType::BF16) {
      std::copy(src, src + K, dst);
      continue;
    }
    for (int64_t k = 0; k < K; ++k) {
      int64_t block = k / kStep * kStep, j = k - block;
      dst[block + (j & 1) * half + j / 2] = src[k];
    }
  }
}

// Weights [k, k + kStep) of one row as two float32 vectors, in pack_x's order.
struct Block {
  vec::F a, b;
};
template <DType WT>
inline Block load_block(const void* row, int64_t k) {
  Block out;
  if constexpr (WT == DType::BF16) {
    vec::load_bf16_even_odd(static_cast<const uint16_t*>(row) + k, out.a, out.b);
  } else if constexpr (WT == DType::F16) {
    const auto* p = static_cast<const uint16_t*>(row) + k;
    out = {vec::load_f16(p), vec::load_f16(p + vec::kLanes)};
  } else {
    const float* p = static_cast<const float*>(row) + k;
    out = {vec::load(p), vec::load(p + vec::kLanes)};
  }
  return out;
}

struct GemvArgs {
  const void* w;
  int64_t K;
  int64_t N;
  const float* xp;  // packed x, row stride Kp
  int64_t Kp;
  const float* x;  // unpacked x (for the K % kStep tail), row stride K
  const float* bias;
  float* out;
};

// R weight rows from `row` times XR rows of x from `xrow`. With `ahead`, every weight load
// also prefetches the line kPrefetchBytes further on: one core keeps too few misses in flight
// on its own to reach DRAM bandwidth.
template <DType WT, int R, int XR>
void tile(const GemvArgs& g, int64_t row, int64_t xrow, bool ahead) {
  constexpr size_t esize = WT == DType::F32 ? 4 : 2;
  const char* rows[R];
  for (int r = 0; r < R; ++r)
    rows[r] = static_cast<const char*>(g.w) + size_t(row + r) * size_t(g.K) * esize;
  const size_t next = ahead ? kPrefetchBytes : 0;
  vec::F acc[R][XR];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < XR; ++j) acc[r][j] = vec::zero();
  const int64_t kmain = g.K / kStep * kStep;
  const float* xp = g.xp + xrow * g.Kp;
  for (int64_t k = 0; k < kmain; k += kStep) {
    vec::F xa[XR], xb[XR];
    for (int j = 0; j < XR; ++j) {
      xa[j] = vec::load(xp + j * g.Kp + k);
      xb[j] = vec::load(xp + j * g.Kp + k + vec::kLanes);
    }
    for (int r = 0; r < R; ++r) {
      if (next)
        for (size_t line = 0; line < kStep * esize; line += 64)
          __builtin_prefetch(rows[r] + next + size_t(k) * esize + line, 0, kPrefetchLocality);
      const Block w = load_block<WT>(rows[r], k);
      for (int j = 0; j < XR; ++j) {
        acc[r][j] = vec::fma(w.a, xa[j], acc[r][j]);
        acc[r][j] = vec::fma(w.b, xb[j], acc[r][j]);
      }
    }
  }
  for (int j = 0; j < XR; ++j) {
    const float* xj = g.x + (xrow + j) * g.K;
    for (int r = 0; r < R; ++r) {
      float s = vec::sum(acc[r][j]);
      for (int64_t k = kmain; k < g.K; ++k) s += load_as_f32(rows[r], WT, k) * xj[k];
      if (g.bias) s += g.bias[row + r];
      g.out[(xrow + j) * g.N + row + r] = s;
    }
  }
}

// Rows [row, row + R) times all n rows of x; only the first pass over the weights (the one
// that reads them from DRAM) prefetches.
template <DType WT, int R>
void tile_rows(const GemvArgs& g, int64_t row, int64_t n) {
  for (int64_t j = 0; j < n; j += kXRows) {
    switch (std::min<int64_t>(kXRows, n - j)) {
      case 4:
        if constexpr (kXRows >= 4) tile<WT, R, 4>(g, row, j, j == 0);
        break;
      case 3:
        if constexpr (kXRows >= 3) tile<WT, R, 3>(g, row, j, j == 0);
        break;
      case 2:
        tile<WT, R, 2>(g, row, j, j == 0);
        break;
      default:
        tile<WT, R, 1>(g, row, j, j == 0);
        break;
    }
  }
}

template <DType WT>
void rows_range(const GemvArgs& g, int64_t n, int64_t r0, int64_t r1) {
  int64_t r = r0;
  for (; n == 1 && r + kRowsOne <= r1; r += kRowsOne) tile<WT, kRowsOne, 1>(g, r, 0, true);
  for (; r + kRows <= r1; r += kRows) tile_rows<WT, kRows>(g, r, n);
  for (; r < r1; ++r) tile_rows<WT, 1>(g, r, n);
}

// x is packed once for all targets (they share dtype and width).
void gemv(const float* x, int64_t n, std::span<const MatmulTarget> ts, const Biases& bias, int nt) {
  const DType wt = ts[0].w.dtype;
  const int64_t K = ts[0].w.cols, Kp = (K + kStep - 1) / kStep * kStep;
  float* xp = thread_scratch<float, 0>(size_t(n * Kp));
  pack_x(x, n, K, wt, xp, Kp);
  const auto rows_of_target = [&](size_t i, int64_t begin, int64_t end) {
    const GemvArgs g{ts[i].w.data, K, ts[i].w.rows, xp, Kp, x, bias[i].get(), ts[i].out};
    switch (wt) {
      case DType::BF16:
        return rows_range<DType::BF16>(g, n, begin, end);
      case DType::F16:
        return rows_range<DType::F16>(g, n, begin, end);
      default:
        return rows_range<DType::F32>(g, n, begin, end);
    }
  };
  std::atomic<int64_t> next{0};
#pragma omp parallel num_threads(nt)
  for_each_share(ts, n == 1 ? kRowsOne : kRows, &next, rows_of_target);
}

#if defined(__AVX512BF16__)
static_assert(kStep == 32, "the bf16 dot products take 32 bf16 values per register");
// The bf16-activation GEMV (opt-in, BF16 weights): x rounded to bf16 once, and VDPBF16PS
// multiplies 32 weights of a row with 32 activations straight from both rows, with no
// widening. One instruction does the 32 multiply-adds that take two FMAs and two widening ops
// on the exact path, so a weight tile read once from DRAM serves up to kDotMaxRows rows of x
// before the arithmetic, not the memory, sets the pace (batched decode).
constexpr int kDotXRows = 4;

struct DotArgs {
  const uint16_t* w;
  int64_t K;
  int64_t N;
  const uint16_t* xb;  // x as bf16, row stride Kp, zero past K
  int64_t Kp;
  const float* bias;
  float* out;
};

// One block of 32 weights of each of R rows times XR rows of x; `m` masks the weights of the
// last, partial block (past K they belong to the next row; x's zero padding makes those lanes
// vanish anyway).
template <int R, int XR, bool Ahead, bool Masked>
inline void dot_step(const uint16_t* const* rows, const uint16_t* xb, int64_t Kp, int64_t k,
                     __mmask32 m, __m512 (&acc)[R][XR]) {
  __m512bh xs[XR];
  for (int j = 0; j < XR; ++j) xs[j] = (__m512bh)_mm512_loadu_si512(xb + j * Kp + k);
  for (int r = 0; r < R; ++r) {
    if constexpr (Ahead)
      __builtin_prefetch(reinterpret_cast<const char*>(rows[r] + k) + kPrefetchBytes, 0,
                         kPrefetchLocality);
    __m512bh w;
    if constexpr (Masked)
      w = (__m512bh)_mm512_maskz_loadu_epi16(m, rows[r] + k);
    else
      w = (__m512bh)_mm512_loadu_si512(rows[r] + k);
    for (int j = 0; j < XR; ++j) acc[r][j] = _mm512_dpbf16_ps(acc[r][j], w, xs[j]);
  }
}

template <int R, int XR, bool Ahead>
void dot_tile(const DotArgs& g, int64_t row, int64_t xrow) {
  const uint16_t* rows[R];
  for (int r = 0; r < R; ++r) rows[r] = g.w + size_t(row + r) * size_t(g.K);
  __m512 acc[R][XR];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < XR; ++j) acc[r][j] = _mm512_setzero_ps();
  const uint16_t* xb = g.xb + xrow * g.Kp;
  const int64_t kmain = g.K / kStep * kStep;
  for (int64_t k = 0; k < kmain; k += kStep)
    dot_step<R, XR, Ahead, false>(rows, xb, g.Kp, k, 0, acc);
  if (kmain < g.K)
    dot_step<R, XR, false, true>(rows, xb, g.Kp, kmain, __mmask32((1u << (g.K - kmain)) - 1), acc);
  for (int j = 0; j < XR; ++j)
    for (int r = 0; r < R; ++r)
      g.out[(xrow + j) * g.N + row + r] =
          _mm512_reduce_add_ps(acc[r][j]) + (g.bias ? g.bias[row + r] : 0.0f);
}

template <int R, int XR>
void dot_tile(const DotArgs& g, int64_t row, int64_t xrow, bool ahead) {
  if (ahead)
    dot_tile<R, XR, true>(g, row, xrow);
  else
    dot_tile<R, XR, false>(g, row, xrow);
}

template <int R>
void dot_rows(const DotArgs& g, int64_t row, int64_t n) {
  for (int64_t j = 0; j < n; j += kDotXRows) {
    switch (std::min<int64_t>(kDotXRows, n - j)) {
      case 4:
        dot_tile<R, 4>(g, row, j, j == 0);
        break;
      case 3:
        dot_tile<R, 3>(g, row, j, j == 0);
        break;
      case 2:
        dot_tile<R, 2>(g, row, j, j == 0);
        break;
      default:
        dot_tile<R, 1>(g, row, j, j == 0);
        break;
    }
  }
}

void gemv_bf16_dot(const float* x, int64_t n, std::span<const MatmulTarget> ts, const Biases& bias,
                   int nt) {
  const int64_t K = ts[0].w.cols, Kp = (K + kStep - 1) / kStep * kStep;
  uint16_t* xb = thread_scratch<uint16_t, 0>(size_t(n * Kp));
  for (int64_t i = 0; i < n; ++i) {
    uint16_t* dst = xb + i * Kp;
    to_bf16(x + i * K, K, dst);
    std::fill(dst + K, dst + Kp, uint16_t(0));
  }
  const auto rows_of_target = [&](size_t i, int64_t begin, int64_t end) {
    const auto* w = static_cast<const uint16_t*>(ts[i].w.data);
    const DotArgs g{w, K, ts[i].w.rows, xb, Kp, bias[i].get(), ts[i].out};
    int64_t r = begin;
    for (; n == 1 && r + kRowsOne <= end; r += kRowsOne) dot_tile<kRowsOne, 1, true>(g, r, 0);
    for (; r + kRows <= end; r += kRows) dot_rows<kRows>(g, r, n);
    for (; r < end; ++r) dot_rows<1>(g, r, n);
  };
  std::atomic<int64_t> next{0};
#pragma omp parallel num_threads(nt)
  for_each_share(ts, n == 1 ? kRowsOne : kRows, &next, rows_of_target);
}
#endif

#else  // portable: widen a few weight rows to float32, then plain dot products

void gemv(const float* x, int64_t n, std::span<const MatmulTarget> ts, const Biases& biases,
          int nt) {
  const int64_t K = ts[0].w.cols;
  const size_t esize = dtype_size(ts[0].w.dtype);
  std::atomic<int64_t> next{0};
#pragma omp parallel num_threads(nt)
  {
    AlignedArray<float> wf = make_aligned<float>(size_t(kRows * K));
    const auto rows_of_target = [&](size_t t, int64_t begin, int64_t end) {
      const WeightView& w = ts[t].w;
      const float* bias = biases[t].get();
      for (int64_t r0 = begin; r0 < end; r0 += kRows) {
        const int64_t rows = std::min<int64_t>(kRows, end - r0);
        convert_to_f32(static_cast<const char*>(w.data) + size_t(r0 * K) * esize, w.dtype, rows * K,
                       wf.get());
        for (int64_t i = 0; i < n; ++i) {
          const float* xi = x + i * K;
          for (int64_t r = 0; r < rows; ++r) {
            const float* wr = wf.get() + r * K;
            float s = 0.0f;
#pragma omp simd reduction(+ : s)
            for (int64_t k = 0; k < K; ++k) s += wr[k] * xi[k];
            ts[t].out[i * w.rows + r0 + r] = s + (bias ? bias[r0 + r] : 0.0f);
          }
        }
      }
    };
    for_each_share(ts, kRows, &next, rows_of_target);
  }
}

#endif

}  // namespace

void matmul_gemv(const float* x, int64_t n, std::span<const MatmulTarget> targets,
                 const MatmulOptions& opt) {
  const Biases b = widen_biases(targets);
  const WeightView& w = targets[0].w;
  const int nt = threads_for(opt.threads, total_elements(targets), kGrain);
#if defined(__AVX512BF16__)
  if (opt.bf16_activations && w.dtype == DType::BF16) return gemv_bf16_dot(x, n, targets, b, nt);
#endif
  AlignedArray<float> rounded;
  if (opt.bf16_activations && w.dtype == DType::BF16) {  // same numbers without VDPBF16PS
    rounded = make_aligned<float>(size_t(n * w.cols));
    round_to_bf16(x, n * w.cols, rounded.get());
    x = rounded.get();
  }
  gemv(x, n, targets, b, nt);
}

}  // namespace qmpi::cpu
