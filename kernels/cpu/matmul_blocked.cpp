// The prefill matmul (and batched decode above the GEMV's row limit). Computed as
// out^T = W . x^T so that the weights need no repacking: x is transposed once into panels of
// tokens (vectors run over tokens) and each weight element is broadcast straight from its row.
// A tile is up to kMR weight rows x one panel of tokens, summed over all of K in registers, then
// written transposed into out.
//
// Exact path: float32 FMAs on weights widened to float32 a block of rows at a time.
// bf16-activation path (BF16 weights): x rounded to bf16 and packed as (k, k+1) pairs, and
// VDPBF16PS multiplies a broadcast weight pair straight from the checkpoint's row.
// Quantized weights (FP8, int4: scaled_rows.h) take the bf16 tiles too: a block of rows is decoded
// into bf16 scratch (e4m3 values times 2^-8, int4's q - z: exact in bf16), a tile sums one scale
// block of inputs at a time and adds those sums times each row's scale, so the only rounding
// beyond float32 sums is x's to bf16, as for bf16 weights. Without VDPBF16PS they take the float32
// tiles on those rows widened, x rounded to bf16 first: the same numbers.
#include <omp.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "kernels/cpu/aligned.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/dot_products.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_targets.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/scaled_rows.h"
#include "kernels/cpu/scratch.h"
#include "kernels/cpu/vec.h"
#include "kernels/cpu/x86.h"

namespace qmpi::cpu {
namespace {

// A tile shape: tokens per panel and weight rows per tile. A tile holds rows x panel / 16
// accumulators; each step of its K loop loads panel / 16 vectors of x and broadcasts one weight
// (pair) per row, so the wide shape (4 vectors x 6 rows) issues 10 loads per 24 VDPBF16PS where
// the narrow one (2 x 12) issues 14: bf16-activation prefill runs 4-10% faster on it. The exact
// path keeps the narrow shape: its x panels are twice as large (float32, not bf16 pairs), and
// wide measured no faster there (-4% to +5%, docs/perf.md). Short batches take the narrow
// shape, whose half panel of 16 tokens wastes less of a panel; at 16 tokens or fewer (batched
// decode) a tile takes 8 rows, not 12: 12 rows' pointers do not fit the general registers next
// to the loop's own, and the spills cost more than the extra tiles (7% at 16 tokens).
struct Shape {
  int nt;  // tokens per panel
  int mr;  // weight rows per tile
};
#if defined(__AVX512F__)
constexpr int kMR = 12;  // the most rows of any shape
constexpr Shape kNarrow{32, 12};
constexpr Shape kWide{64, 6};
constexpr Shape kHalf{32, 8};
constexpr bool kHalfPanels = true;
#elif defined(QMPI_CPU_VEC)
// AVX2's 16 registers of 8 floats: 6 rows x 2 vectors of accumulators, 2 of x and a broadcast.
constexpr int kMR = 6;
constexpr Shape kNarrow{16, 6};
constexpr Shape kWide = kNarrow;
constexpr Shape kHalf = kNarrow;
constexpr bool kHalfPanels = true;
#else
constexpr int kMR = 4;
constexpr Shape kNarrow{16, 4};
constexpr Shape kWide = kNarrow;
constexpr Shape kHalf = kNarrow;
constexpr bool kHalfPanels = false;
#endif
#if defined(__AVX512BF16__)
// Quantized rows on VDPBF16PS (tile_bf16_scaled): below kWideFrom tokens a block's partial sums
// and the tile's scaled totals both stay in registers (2 x 12 accumulators); from it the wide
// shape's 24 accumulators take the partial sums and the totals wait in the tile's L1 buffer.
constexpr Shape kScaled{32, 6};
constexpr Shape kScaledWide{64, 6};
#else
constexpr Shape kScaled = kNarrow;  // unused: the scaled tile needs VDPBF16PS
constexpr Shape kScaledWide = kNarrow;
#endif
// Tokens from which a bf16 chunk takes the wide shape: below 64, a 64-token panel computes too
// much padding (48 tokens ran 10-20% slower wide than narrow).
constexpr int64_t kWideFrom = 64;
constexpr int kTileFloats = std::max(kNarrow.nt * kNarrow.mr, kWide.nt* kWide.mr);
// `scaled`: quantized rows on VDPBF16PS, whose full panels take tile_bf16_scaled.
Shape shape_for(int64_t tokens, bool bf16_dot, bool scaled) {
  if (kHalfPanels && tokens <= kNarrow.nt / 2) return kHalf;
  if (scaled) return tokens >= kWideFrom ? kScaledWide : kScaled;
  return bf16_dot && tokens >= kWideFrom ? kWide : kNarrow;
}
// Tokens packed and multiplied at a time: bounds the packed copy of x for long prompts.
constexpr int64_t kChunkTokens = 256;
// Panel p holds tokens [p * nt, p * nt + width) of x transposed: element (k, t) at k * width + t
// (float32), or pair (kp, t) at kp * width + t (bf16 pairs), zero past the last token.
// A last panel of at most nt / 2 tokens is packed at half width.
struct Panels {
  int64_t n;
  int64_t depth;  // K (float32) or ceil(K / 2) (bf16 pairs)
  int nt;         // tokens per panel: the chunk's Shape
  int64_t count() const { return (n + nt - 1) / nt; }
  int64_t tokens(int64_t p) const { return std::min<int64_t>(nt, n - p * nt); }
  int width(int64_t p) const { return kHalfPanels && tokens(p) <= nt / 2 ? nt / 2 : nt; }
  size_t offset(int64_t p) const { return size_t(p) * nt * size_t(depth); }
  size_t size() const { return size_t(count()) * nt * size_t(depth); }
};

// dst[k * w + t] = src[t * ld + k] for the 32-bit words k < n of the rows t < cnt (cnt <= w).
// With vectors, kLanes rows and kLanes words at a time, transposed in registers: one word at a
// time, the packing of batched decode's 16-token panels took 2.5% of the step.
void transpose_into_panel(const uint32_t* src, int64_t ld, int64_t cnt, int64_t n, int w,
                          uint32_t* dst) {
  int64_t k = 0;
#if defined(QMPI_CPU_VEC)
  constexpr int L = vec::kLanes;
  if (w % L == 0)
    for (; k + L <= n; k += L)
      for (int64_t t0 = 0; t0 < cnt; t0 += L) {
        vec::F v[L];
        for (int j = 0; j < L; ++j)
          v[j] = t0 + j < cnt ? vec::load(reinterpret_cast<const float*>(src + (t0 + j) * ld + k))
                              : vec::zero();
        vec::transpose(v);
        // Lanes past cnt store zeros inside the panel's width: its padding.
        for (int j = 0; j < L; ++j)
          vec::store(reinterpret_cast<float*>(dst + (k + j) * w + t0), v[j]);
      }
#endif
  for (int64_t t = 0; t < cnt; ++t)
    for (int64_t kk = k; kk < n; ++kk)  // memcpy: the words are floats or bf16 pairs
      std::memcpy(dst + kk * w + t, src + t * ld + kk, 4);
}

// Depths [d.begin, d.end) of panel p: the threads split the depth, not the panels, so that a
// single panel (batched decode) is packed by all of them.
void pack_panel_f32(const float* x, int64_t K, const Panels& pn, int64_t p, Range d, float* dst) {
  const int w = pn.width(p);
  const int64_t cnt = pn.tokens(p);
  if (cnt < w) std::fill(dst + d.begin * w, dst + d.end * w, 0.0f);
  transpose_into_panel(reinterpret_cast<const uint32_t*>(x + p * pn.nt * K + d.begin), K, cnt,
                       d.end - d.begin, w, reinterpret_cast<uint32_t*>(dst + d.begin * w));
}

void pack_panel_bf16(const float* x, int64_t K, const Panels& pn, int64_t p, Range d,
                     uint32_t* dst) {
  const int w = pn.width(p);
  const int64_t cnt = pn.tokens(p);
  if (cnt < w) std::fill(dst + d.begin * w, dst + d.end * w, 0u);
  if (d.begin >= d.end) return;
  // The row's elements rounded 16 at a time (to_bf16), then each (k, k + 1) pair moved as one
  // 32-bit word: element k in the low half, as the little-endian pair VDPBF16PS reads.
  const int64_t n = d.end - d.begin, k0 = 2 * d.begin, k1 = std::min(2 * d.end, K);
  uint16_t* pairs = thread_scratch<uint16_t, 2>(size_t(2 * n * cnt));
  for (int64_t t = 0; t < cnt; ++t) {
    uint16_t* rounded = pairs + 2 * n * t;
    to_bf16(x + (p * pn.nt + t) * K + k0, k1 - k0, rounded);
    if (k1 < 2 * d.end) rounded[k1 - k0] = 0;  // odd K: the last weight pairs with a zero
  }
  // Each rounded pair is one 32-bit word, read whole (the scratch is aligned).
  transpose_into_panel(reinterpret_cast<const uint32_t*>(pairs), n, cnt, n, w, dst + d.begin * w);
}

// A finished tile: tile[i][t] (row stride: the panel's width) is out[token0 + t, row0 + i].
// Not inlined: inside the row loop its scalar loop shared registers with the loop's pointers and
// spilled them, which cost bf16 prefill 4-6% (CPU time of a GEMM pass at 64 and 128 tokens).
[[gnu::noinline]] void store_tile(const float* tile, int width, int mr, int64_t tokens,
                                  int64_t row0, int64_t token0, const float* bias, float* out,
                                  int64_t N) {
#if defined(QMPI_CPU_VEC)
  // kLanes tokens at a time: the tile's rows (mr <= kLanes) transposed in registers, so that
  // vector j holds token j's mr outputs, stored as one run. Element by element it took 6% of an
  // int4 prefill pass at 128 tokens.
  constexpr int L = vec::kLanes;
  static_assert(kMR <= L);
#if defined(__AVX512F__)
  // Up to 8 rows (batched decode's tiles, the wide shape's): the two 8-token halves of each
  // register transposed side by side, each vector then holding two tokens' outputs (token j in
  // lanes 0-7, j + 8 in 8-15). The full transpose of 16 registers, half of them zeros, took
  // 3.3% of a 16-sequence decode step.
  if (mr <= 8) {
    const __mmask16 lo = __mmask16((1u << mr) - 1), hi = __mmask16(lo << 8);
    // The bias in both halves (its first 8 lanes copied into the upper 8).
    const vec::F b0 = bias ? _mm512_maskz_loadu_ps(lo, bias + row0) : vec::zero();
    const vec::F b = _mm512_shuffle_f32x4(b0, b0, _MM_SHUFFLE(1, 0, 1, 0));
    for (int64_t t0 = 0; t0 < tokens; t0 += L) {
      vec::F v[8];
      for (int i = 0; i < 8; ++i) v[i] = i < mr ? vec::load(tile + i * width + t0) : vec::zero();
      vec::transpose_halves(v);
      for (int64_t j = 0; j < 8 && t0 + j < tokens; ++j) {
        const vec::F o = vec::add(v[j], b);
        _mm512_mask_storeu_ps(out + (token0 + t0 + j) * N + row0, lo, o);
        if (t0 + j + 8 < tokens)  // lanes 8.. land at row0 of token j + 8
          _mm512_mask_storeu_ps(out + (token0 + t0 + j + 8) * N + row0 - 8, hi, o);
      }
    }
    return;
  }
#endif
  const vec::F b = bias ? vec::load_first(bias + row0, mr) : vec::zero();
  for (int64_t t0 = 0; t0 < tokens; t0 += L) {
    vec::F v[L];
    for (int i = 0; i < L; ++i) v[i] = i < mr ? vec::load(tile + i * width + t0) : vec::zero();
    vec::transpose(v);
    for (int64_t j = 0; j < L && t0 + j < tokens; ++j)
      vec::store_first(out + (token0 + t0 + j) * N + row0, mr, vec::add(v[j], b));
  }
#else
  for (int64_t t = 0; t < tokens; ++t) {
    float* o = out + (token0 + t) * N + row0;
    for (int i = 0; i < mr; ++i) o[i] = tile[i * width + t] + (bias ? bias[row0 + i] : 0.0f);
  }
#endif
}

// Lines of the next weight block to bring into L2 while a tile computes, one every `every`
// steps of its K loop: a burst of hundreds of prefetches at the start of a tile filled the miss
// queue and stalled the loads behind it (batched decode, where a block is a single panel).
// Tiles take it by reference and copy it: passed by value, it went through the stack as one
// 32-byte load of the caller's four scalar stores, which cannot be forwarded, and that stall on
// every tile call took 4% of a 16-sequence decode step's samples.
struct Prefetch {
  const char* p = nullptr;
  int64_t lines = 0;
  int64_t every = 1;
  int64_t countdown = 1;
  inline void step() {
    if (--countdown > 0) return;
    countdown = every;
    if (lines > 0) {
      __builtin_prefetch(p, 0, 2);
      p += 64;
      --lines;
    }
  }
  void finish() {
    for (; lines > 0; --lines, p += 64) __builtin_prefetch(p, 0, 2);
  }
};

// Slice `part` of `parts` of [p, p + bytes), spread over `steps` loop steps.
Prefetch prefetch_slice(const char* p, size_t bytes, int64_t part, int64_t parts, int64_t steps) {
  const int64_t lines = int64_t((bytes + 63) / 64);
  const int64_t b = lines * part / parts, e = lines * (part + 1) / parts;
  const int64_t every = std::max<int64_t>(1, steps / std::max<int64_t>(1, e - b));
  return {p + b * 64, e - b, every, every};
}

// How a tile leaves its sums: stored as they are, or (quantized, one scale block of K at a time)
// times each row's scale, stored by the first block and added by the others.
struct Epilogue {
  const float* scale = nullptr;  // [rows of the tile] or null
  bool add = false;
};

using TileFn = void (*)(const void* w, int64_t ld, int64_t K, const void* xp, float* tile,
                        const Prefetch& pf, Epilogue ep);

#if defined(QMPI_CPU_VEC)
template <int MR, int NV>
void write_tile(const vec::F (&acc)[MR][NV], float* tile, Epilogue ep) {
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v) {
      float* dst = tile + (i * NV + v) * vec::kLanes;
      vec::F sum = acc[i][v];
      if (ep.scale) {
        const vec::F s = vec::splat(ep.scale[i]);
        sum = ep.add ? vec::fma(sum, s, vec::load(dst)) : vec::mul(sum, s);
      }
      vec::store(dst, sum);
    }
}

template <int MR, int NV>
void tile_f32(const void* wv, int64_t ld, int64_t K, const void* xv, float* tile,
              const Prefetch& pf_in, Epilogue ep) {
  Prefetch pf = pf_in;
  const float* w = static_cast<const float*>(wv);
  const float* xp = static_cast<const float*>(xv);
  vec::F acc[MR][NV];
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v) acc[i][v] = vec::zero();
  for (int64_t k = 0; k < K; ++k) {
    pf.step();
    vec::F xs[NV];
    for (int v = 0; v < NV; ++v) xs[v] = vec::load(xp + (k * NV + v) * vec::kLanes);
    for (int i = 0; i < MR; ++i) {
      const vec::F b = vec::splat(w[i * ld + k]);
      for (int v = 0; v < NV; ++v) acc[i][v] = vec::fma(b, xs[v], acc[i][v]);
    }
  }
  pf.finish();
  write_tile<MR, NV>(acc, tile, ep);
}

#if defined(__AVX512BF16__)
// acc += rows [0, MR) of w (row stride ld) times the panel's pairs over inputs [k0, k1) (k0 even).
template <int MR, int NV>
inline __attribute__((always_inline)) void dp_range(__m512 (&acc)[MR][NV], const uint16_t* w,
                                                    int64_t ld, int64_t k0, int64_t k1,
                                                    const uint32_t* xp, Prefetch& pf) {
  const auto step = [&](int64_t kp, auto pair_of_row) {
    pf.step();
    __m512bh xs[NV];
    for (int v = 0; v < NV; ++v) xs[v] = (__m512bh)_mm512_loadu_si512(xp + kp * 16 * NV + 16 * v);
    for (int i = 0; i < MR; ++i) {
      const __m512bh b = (__m512bh)_mm512_set1_epi32(int(pair_of_row(i)));
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], xs[v], b);
    }
  };
  for (int64_t kp = k0 / 2; kp < k1 / 2; ++kp)
    step(kp, [&](int i) {
      uint32_t pr;
      std::memcpy(&pr, w + i * ld + 2 * kp, 4);
      return pr;
    });
  if (k1 % 2)  // the last weight pairs with the zero that pads x
    step(k1 / 2, [&](int i) { return uint32_t(w[i * ld + k1 - 1]); });
}

template <int MR, int NV>
void tile_bf16(const void* wv, int64_t ld, int64_t K, const void* xv, float* tile,
               const Prefetch& pf_in, Epilogue ep) {
  Prefetch pf = pf_in;
  __m512 acc[MR][NV];
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
  dp_range<MR, NV>(acc, static_cast<const uint16_t*>(wv), ld, 0, K,
                   static_cast<const uint32_t*>(xv), pf);
  pf.finish();
  write_tile<MR, NV>(acc, tile, ep);
}

// acc += the pairs of x times the pair at p broadcast to every lane, the broadcast being the
// instruction's memory operand ({1to16}); GCC emits a separate VPBROADCASTD for
// _mm512_dpbf16_ps.
inline __attribute__((always_inline)) void dp_bcast(__m512& acc, __m512 x, const uint16_t* p) {
  asm("vdpbf16ps %2%{1to16%}, %1, %0"
      : "+v"(acc)
      : "v"(x), "m"(*reinterpret_cast<const uint32_t*>(p)));
}
inline __attribute__((always_inline)) void rows8(__m512& a0, __m512& a1, __m512& a2, __m512& a3,
                                                 __m512& a4, __m512& a5, __m512& a6, __m512& a7,
                                                 __m512 x, const uint16_t* c, int64_t ld) {
  dp_bcast(a0, x, c);
  dp_bcast(a1, x, c + ld);
  dp_bcast(a2, x, c + 2 * ld);
  dp_bcast(a3, x, c + 3 * ld);
  dp_bcast(a4, x, c + 4 * ld);
  dp_bcast(a5, x, c + 5 * ld);
  dp_bcast(a6, x, c + 6 * ld);
  dp_bcast(a7, x, c + 7 * ld);
}

// The 8-row tile of a one-vector panel (16 tokens or fewer: batched decode). With one vector of
// x a step feeds only 8 accumulators, too few chains to cover VDPBF16PS's latency, so even and
// odd pairs go to two sets, summed at the end: 16 tokens x 8 rows ran at 275 GFLOPS with one set
// and 350 with two on one core (a 8192 x 4864 bf16 weight, the 32-token tile's rate is ~385).
// The accumulators are named, not an array: GCC keeps an array that asm operands update in
// memory.
void tile_bf16_v1x8(const void* wv, int64_t ld, int64_t K, const void* xv, float* tile,
                    const Prefetch& pf_in, Epilogue ep) {
  Prefetch pf = pf_in;
  const uint16_t* w = static_cast<const uint16_t*>(wv);
  const uint32_t* xp = static_cast<const uint32_t*>(xv);
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  __m512 b0 = a0, b1 = a0, b2 = a0, b3 = a0, b4 = a0, b5 = a0, b6 = a0, b7 = a0;
  const int64_t pairs = K / 2;
  int64_t kp = 0;
  for (; kp + 2 <= pairs; kp += 2) {
    pf.step();
    pf.step();
    const uint16_t* c = w + 2 * kp;
    rows8(a0, a1, a2, a3, a4, a5, a6, a7, _mm512_loadu_ps(xp + kp * 16), c, ld);
    rows8(b0, b1, b2, b3, b4, b5, b6, b7, _mm512_loadu_ps(xp + kp * 16 + 16), c + 2, ld);
  }
  if (kp < pairs) {
    pf.step();
    rows8(a0, a1, a2, a3, a4, a5, a6, a7, _mm512_loadu_ps(xp + kp * 16), w + 2 * kp, ld);
  }
  __m512 acc[8][1] = {{_mm512_add_ps(a0, b0)}, {_mm512_add_ps(a1, b1)}, {_mm512_add_ps(a2, b2)},
                      {_mm512_add_ps(a3, b3)}, {_mm512_add_ps(a4, b4)}, {_mm512_add_ps(a5, b5)},
                      {_mm512_add_ps(a6, b6)}, {_mm512_add_ps(a7, b7)}};
  if (K % 2) {  // the last weight pairs with the zero that pads x
    const __m512bh xs = (__m512bh)_mm512_loadu_si512(xp + pairs * 16);
    for (int i = 0; i < 8; ++i)
      acc[i][0] =
          _mm512_dpbf16_ps(acc[i][0], xs, (__m512bh)_mm512_set1_epi32(int(w[i * ld + K - 1])));
  }
  pf.finish();
  write_tile<8, 1>(acc, tile, ep);
}

// MR quantized rows (decoded to bf16, ScaledRows) x a panel of NV vectors of tokens over all of
// K: each scale block's sums are taken in `acc` and added to `total` times each row's scale
// (scales[b * kMR + i]). A tile call per block, storing and reloading the totals, made an FP8
// pass at 64-128 tokens 11-21% slower than bf16 weights' (0-10% this way: docs/perf.md). The same
// operations in the same order as per-block tiles with the scaled epilogue (still taken by half
// panels and the float32 tiles): the same sums. With 4 vectors (the wide shape) the totals live
// in `tile` (L1) instead: 24 accumulators issue 10 loads per 24 VDPBF16PS where 12 issue 8 per
// 12, and a block's 24 loads and stores of totals come once per 16 or more steps.
template <int MR, int NV>
void tile_bf16_scaled(const uint16_t* w, int64_t ld, std::span<const int64_t> starts,
                      const float* scales, const uint32_t* xp, float* tile, const Prefetch& pf_in) {
  Prefetch pf = pf_in;
  constexpr bool in_tile = NV > 2;  // the totals' place
  __m512 total[MR][NV], acc[MR][NV];
  for (size_t b = 0; b + 1 < starts.size(); ++b) {
    for (int i = 0; i < MR; ++i)
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
    dp_range<MR, NV>(acc, w, ld, starts[b], starts[b + 1], xp, pf);
    for (int i = 0; i < MR; ++i) {
      const __m512 sc = _mm512_set1_ps(scales[b * kMR + i]);
      for (int v = 0; v < NV; ++v) {
        float* t = tile + (i * NV + v) * 16;
        const __m512 before = b == 0    ? _mm512_setzero_ps()
                              : in_tile ? _mm512_load_ps(t)
                                        : total[i][v];
        if constexpr (in_tile)
          _mm512_store_ps(t, _mm512_fmadd_ps(acc[i][v], sc, before));
        else
          total[i][v] = _mm512_fmadd_ps(acc[i][v], sc, before);
      }
    }
  }
  pf.finish();
  if constexpr (!in_tile)
    for (int i = 0; i < MR; ++i)
      for (int v = 0; v < NV; ++v) _mm512_store_ps(tile + (i * NV + v) * 16, total[i][v]);
}

using ScaledTileFn = void (*)(const uint16_t* w, int64_t ld, std::span<const int64_t> starts,
                              const float* scales, const uint32_t* xp, float* tile,
                              const Prefetch& pf);
template <int NV, int... I>
constexpr std::array<ScaledTileFn, kScaled.mr> scaled_tiles(std::integer_sequence<int, I...>) {
  return {&tile_bf16_scaled<I + 1, NV>...};
}
ScaledTileFn pick_scaled_tile(int mr, int width) {
  static_assert(kScaledWide.mr == kScaled.mr);
  static constexpr auto v1 = scaled_tiles<1>(std::make_integer_sequence<int, kScaled.mr>{});
  static constexpr auto v2 = scaled_tiles<2>(std::make_integer_sequence<int, kScaled.mr>{});
  static constexpr auto v4 = scaled_tiles<4>(std::make_integer_sequence<int, kScaled.mr>{});
  return width == 16 ? v1[mr - 1] : width == 32 ? v2[mr - 1] : v4[mr - 1];
}
#endif

template <template <int, int> class Kernel, int NV, int... I>
constexpr std::array<TileFn, kMR> tiles_by_rows(std::integer_sequence<int, I...>) {
  return {&Kernel<I + 1, NV>::run...};
}
// Tiles of 1..kMR rows for each panel width: NV = 1 and 2 vectors of tokens, and the wide
// shape's (4 on AVX-512, with at most kWide.mr rows; on AVX2 the wide shape is the narrow one).
constexpr int kWideVecs = kWide.nt / vec::kLanes;
template <template <int, int> class Kernel>
struct TileTables {
  static constexpr auto v1 = tiles_by_rows<Kernel, 1>(std::make_integer_sequence<int, kMR>{});
  static constexpr auto v2 = tiles_by_rows<Kernel, 2>(std::make_integer_sequence<int, kMR>{});
  static constexpr auto wide =
      tiles_by_rows<Kernel, kWideVecs>(std::make_integer_sequence<int, kWide.mr>{});
  static TileFn pick(int mr, int width) {
    const int nv = width / vec::kLanes;
    return nv == 1 ? v1[mr - 1] : nv == 2 ? v2[mr - 1] : wide[mr - 1];
  }
};
template <int MR, int NV>
struct F32Kernel {
  static void run(const void* w, int64_t ld, int64_t K, const void* xp, float* tile,
                  const Prefetch& pf, Epilogue ep) {
    tile_f32<MR, NV>(w, ld, K, xp, tile, pf, ep);
  }
};
#if defined(__AVX512BF16__)
template <int MR, int NV>
struct Bf16Kernel {
  static void run(const void* w, int64_t ld, int64_t K, const void* xp, float* tile,
                  const Prefetch& pf, Epilogue ep) {
    if constexpr (NV == 1 && MR == 8)
      tile_bf16_v1x8(w, ld, K, xp, tile, pf, ep);
    else
      tile_bf16<MR, NV>(w, ld, K, xp, tile, pf, ep);
  }
};
#endif

// The kernel for mr rows and a panel of `width` tokens.
TileFn pick_tile(bool bf16, int mr, int width) {
#if defined(__AVX512BF16__)
  if (bf16) return TileTables<Bf16Kernel>::pick(mr, width);
#endif
  return TileTables<F32Kernel>::pick(mr, width);
}

#else  // portable: the same tiles as plain loops the compiler vectorizes

template <int MR>
void tile_portable(const void* wv, int64_t ld, int64_t K, const void* xv, float* tile,
                   const Prefetch& pf_in, Epilogue ep) {
  Prefetch pf = pf_in;
  pf.finish();
  const float* w = static_cast<const float*>(wv);
  const float* xp = static_cast<const float*>(xv);
  constexpr int nt = kNarrow.nt;
  float acc[MR][nt] = {};
  for (int64_t k = 0; k < K; ++k)
    for (int i = 0; i < MR; ++i) {
      const float b = w[i * ld + k];
#pragma omp simd
      for (int t = 0; t < nt; ++t) acc[i][t] += b * xp[k * nt + t];
    }
  for (int i = 0; i < MR; ++i)
    for (int t = 0; t < nt; ++t) {
      const float s = ep.scale ? ep.scale[i] : 1.0f;
      tile[i * nt + t] = acc[i][t] * s + (ep.add ? tile[i * nt + t] : 0.0f);
    }
}

TileFn pick_tile(bool, int mr, int) {
  static constexpr std::array<TileFn, kMR> table{&tile_portable<1>, &tile_portable<2>,
                                                 &tile_portable<3>, &tile_portable<4>};
  return table[mr - 1];
}

#endif

// The panels of x are packed once for all targets (they share dtype and width). With `sr` (one
// per target), the targets' views only give the shapes (their data is unused) and target i's rows
// are sr[i]'s.
void blocked(const float* x, int64_t n, std::span<const MatmulTarget> ts, const Biases& biases,
             int nt, bool bf16_dot, const ScaledRows* const* sr) {
  const int64_t K = ts[0].w.cols;
  const int64_t depth = bf16_dot ? (K + 1) / 2 : K;
  const int64_t n0 = std::min(n, kChunkTokens);  // the first chunk is the largest
  // Quantized rows on VDPBF16PS take tile_bf16_scaled outside half panels.
  const bool scaled = sr && bf16_dot;
  uint32_t* xp =
      thread_scratch<uint32_t, 0>(Panels{n0, depth, shape_for(n0, bf16_dot, scaled).nt}.size());
  const size_t tsize = bf16_dot ? 2 : 4;  // bytes per weight as tiles read it
  // Scale blocks of the inputs: the tiles' sums are scaled one block at a time (dense: one).
  int64_t max_blocks = 1;
  for (size_t i = 0; sr && i < ts.size(); ++i) max_blocks = std::max(max_blocks, sr[i]->blocks);
  const int64_t ld = sr ? (K + 31) / 32 * 32 : K;  // row stride of the decoded rows
  // One counter of claimed runs per chunk of tokens, for dense weights (see for_each_share).
  const auto next =
      std::make_unique<std::atomic<int64_t>[]>(size_t((n + kChunkTokens - 1) / kChunkTokens));
#pragma omp parallel num_threads(nt)
  {
    const int t = omp_get_thread_num(), tn = omp_get_num_threads();
    float* widened = bf16_dot ? nullptr : thread_scratch<float, 1>(size_t(kMR * ld));
    uint16_t* decoded = sr ? thread_scratch<uint16_t, 4>(size_t(kMR * ld)) : nullptr;
    float* scales = sr ? thread_scratch<float, 5>(size_t(kMR * max_blocks)) : nullptr;
    int64_t* starts = sr ? thread_scratch<int64_t, 6>(size_t(max_blocks + 1)) : nullptr;
    alignas(64) float tile[kTileFloats];
    for (int64_t c0 = 0; c0 < n; c0 += kChunkTokens) {
      const int64_t cn = std::min(kChunkTokens, n - c0);
      const Shape shape = shape_for(cn, bf16_dot, scaled);
      [[maybe_unused]] const bool fused = scaled && shape.mr == kScaled.mr &&
                                          (shape.nt == kScaled.nt || shape.nt == kScaledWide.nt);
      const Panels pn{cn, depth, shape.nt};
      const float* xc = x + c0 * K;
      const Range dr = split_range(pn.depth, 1, t, tn);
      for (int64_t p = 0; p < pn.count(); ++p) {
        if (bf16_dot)
          pack_panel_bf16(xc, K, pn, p, dr, xp + pn.offset(p));
        else
          pack_panel_f32(xc, K, pn, p, dr, reinterpret_cast<float*>(xp) + pn.offset(p));
      }
#pragma omp barrier
      const int block = shape.mr;
      std::atomic<int64_t>* claims = sr ? nullptr : &next[size_t(c0 / kChunkTokens)];
      for_each_share(ts, block, claims, [&](size_t i, int64_t begin, int64_t end) {
        const WeightView& w = ts[i].w;
        const ScaledRows* q = sr ? sr[i] : nullptr;
        const char* wbytes = q ? q->bytes : static_cast<const char*>(w.data);
        // Bytes of a row as stored (approximately, for a quantized layout: prefetching only).
        const size_t row_bytes = q ? size_t(q->row_bytes) : size_t(K) * dtype_size(w.dtype);
        const int64_t blocks = q ? q->blocks : 1;
        for (int64_t b = 0; q && b <= blocks; ++b) starts[b] = q->block_start(b);
        for (int64_t r0 = begin; r0 < end; r0 += block) {
          const int mr = int(std::min<int64_t>(block, end - r0));
          const void* rows = wbytes + size_t(r0) * row_bytes;
          if (q) {
            q->decode(r0, mr, ld, decoded, scales, kMR);
            rows = decoded;
            if (!bf16_dot) {  // the float32 tiles take the decoded rows widened
              for (int i = 0; i < mr; ++i)
                convert_to_f32(decoded + i * ld, DType::BF16, K, widened + i * ld);
              rows = widened;
            }
          } else if (!bf16_dot) {  // float32 rows in a contiguous scratch (a copy for F32 weights)
            convert_to_f32(rows, w.dtype, mr * K, widened);
            rows = widened;
          }
          // The next block's rows come from DRAM: ask for them while this block computes.
          const int64_t next = std::min<int64_t>(block, end - r0 - mr);
          const size_t next_bytes = size_t(std::max<int64_t>(next, 0)) * row_bytes;
          const char* next_rows = wbytes + size_t(r0 + mr) * row_bytes;
          for (int64_t p = 0; p < pn.count(); ++p) {
            const uint32_t* xpp = xp + pn.offset(p);
#if defined(__AVX512BF16__)
            if (fused)
              pick_scaled_tile(mr, pn.width(p))(
                  decoded, ld, {starts, size_t(blocks + 1)}, scales, xpp, tile,
                  prefetch_slice(next_rows, next_bytes, p, pn.count(), depth));
            else
#endif
            {
              const TileFn tile_fn = pick_tile(bf16_dot, mr, pn.width(p));
              for (int64_t b = 0; b < blocks; ++b) {
                const int64_t k0 = q ? starts[b] : 0, k1 = q ? starts[b + 1] : K;
                const int64_t d0 = bf16_dot ? k0 / 2 : k0;  // k0 is even where bf16_dot
                const Prefetch pf = prefetch_slice(next_rows, next_bytes, p * blocks + b,
                                                   pn.count() * blocks, depth / blocks);
                const Epilogue ep = q ? Epilogue{scales + b * kMR, b > 0} : Epilogue{};
                tile_fn(static_cast<const char*>(rows) + k0 * tsize, q ? ld : K, k1 - k0,
                        xpp + d0 * pn.width(p), tile, pf, ep);
              }
            }
            store_tile(tile, pn.width(p), mr, pn.tokens(p), r0, c0 + p * pn.nt, biases[i].get(),
                       ts[i].out, w.rows);
          }
        }
      });
#pragma omp barrier  // the next chunk overwrites the panels
    }
  }
}

// x rounded to bf16 in `storage`: the bf16 dot products' numbers for the float32 tiles.
const float* bf16_rounded(const float* x, int64_t count, AlignedArray<float>& storage) {
  storage = make_aligned<float>(size_t(count));
  round_to_bf16(x, count, storage.get());
  return storage.get();
}

}  // namespace

void matmul_blocked(const float* x, int64_t n, std::span<const MatmulTarget> targets,
                    const MatmulOptions& opt) {
  const Biases b = widen_biases(targets);
  const WeightView& w = targets[0].w;
  const bool bf16_act = opt.bf16_activations && w.dtype == DType::BF16;
  AlignedArray<float> rounded;
  if (bf16_act && !kHaveBf16Dot) x = bf16_rounded(x, n * w.cols, rounded);
  const int nt = threads_for(opt.threads, n * total_elements(targets), int64_t(1) << 20);
  blocked(x, n, targets, b, nt, bf16_act && kHaveBf16Dot, nullptr);
}

void matmul_blocked_scaled(const float* x, int64_t n, std::span<const ScaledTarget> targets,
                           const MatmulOptions& opt) {
  AlignedArray<float> rounded;
  if (!kHaveBf16Dot) x = bf16_rounded(x, n * targets[0].w->cols, rounded);
  std::vector<MatmulTarget> ts;
  std::vector<const ScaledRows*> rows;
  for (const ScaledTarget& t : targets) {
    ts.push_back({{nullptr, DType::BF16, t.w->rows, t.w->cols, nullptr}, t.bias, t.out});
    rows.push_back(t.w);
  }
  const int nt = threads_for(opt.threads, n * total_elements<MatmulTarget>(ts), int64_t(1) << 20);
  blocked(x, n, ts, widen_biases<MatmulTarget>(ts), nt, kHaveBf16Dot, rows.data());
}

}  // namespace qmpi::cpu
