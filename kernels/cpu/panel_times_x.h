// The inner GEMM of the quantized prefill matmuls (int4 and FP8): a chunk of kPanelRows output
// rows x kn inputs of the weight, already dequantized into an L1-sized float panel laid out
// input-major (panel[k * kPanelRows + rr]), times every token of x. The classic broadcast kernel:
// the panel's weight vectors of one input from L1 and one broadcast of x per token feed an FMA
// each, a tile of tokens' accumulators in registers. The first chunk of a panel stores (with the
// bias), the others add, so each output is a sum of per-chunk partial sums.
#pragma once
#include <algorithm>
#include <cstdint>

#include "kernels/cpu/vec.h"
#include "kernels/cpu/x86.h"

namespace qmpi::cpu::panel {

inline constexpr int kPanelRows = 32;  // output rows per panel

struct Gemm {
  const float* x;  // [n][ldx]
  int64_t ldx;
  const float* bias;  // [rows] or null
  float* out;         // [n][rows]
  int64_t rows;
};

#if defined(QMPI_CPU_VEC)

constexpr int kPanelVecs = kPanelRows / vec::kLanes;
// A tile is kTileVecs vectors of the panel's rows (all of them on AVX-512, half on AVX2) times
// kTokens tokens: per input, kTileVecs weight loads and kTokens broadcasts feed kTileVecs x kTokens
// FMAs from 24 (AVX-512) or 12 (AVX2) accumulators. AVX2 with all 4 vectors at once had only
// registers for 3 tokens and took the weights as FMA memory operands: 15 loads per 12 FMAs, bound
// by the load ports (int4 prefill GEMM at ~95 GFLOPS, 2 threads, against 146-160 for bf16).
constexpr int kTileVecs = 2;
constexpr int kTokens = vec::kLanes == 16 ? 12 : 6;

template <int T>
void tokens_tile(const Gemm& a, const float* panel, int64_t r0, int64_t k0, int64_t kn, bool first,
                 int64_t t0, int z0, const int* live) {
  vec::F acc[T][kTileVecs];
  for (int t = 0; t < T; ++t)
    for (int z = 0; z < kTileVecs; ++z) acc[t][z] = vec::zero();
  for (int64_t k = 0; k < kn; ++k) {
    vec::F w[kTileVecs];
    for (int z = 0; z < kTileVecs; ++z)
      w[z] = vec::load(panel + k * kPanelRows + (z0 + z) * vec::kLanes);
    for (int t = 0; t < T; ++t) {
      const vec::F xb = vec::splat(a.x[(t0 + t) * a.ldx + k0 + k]);
      for (int z = 0; z < kTileVecs; ++z) acc[t][z] = vec::fma(w[z], xb, acc[t][z]);
    }
  }
  for (int t = 0; t < T; ++t) {
    float* o = a.out + (t0 + t) * a.rows + r0;
    for (int z = 0; z < kTileVecs; ++z) {
      const int at = (z0 + z) * vec::kLanes, n = live[z0 + z];
      const vec::F base = first ? (a.bias ? vec::load_first(a.bias + r0 + at, n) : vec::zero())
                                : vec::load_first(o + at, n);
      vec::store_first(o + at, n, vec::add(acc[t][z], base));
    }
  }
}

// Rows [r0, r0 + kPanelRows) (those below a.rows) of out for inputs [k0, k0 + kn) of x.
inline void panel_times_x(const Gemm& a, const float* panel, int64_t r0, int64_t k0, int64_t kn,
                          bool first, int64_t n) {
  int live[kPanelVecs];  // rows of each vector below a.rows
  for (int z = 0; z < kPanelVecs; ++z)
    live[z] = int(std::clamp<int64_t>(a.rows - r0 - z * vec::kLanes, 0, vec::kLanes));
  for (int z0 = 0; z0 < kPanelVecs; z0 += kTileVecs) {
    int64_t t = 0;
    for (; t + kTokens <= n; t += kTokens)
      tokens_tile<kTokens>(a, panel, r0, k0, kn, first, t, z0, live);
    for (; t + 4 <= n; t += 4) tokens_tile<4>(a, panel, r0, k0, kn, first, t, z0, live);
    for (; t < n; ++t) tokens_tile<1>(a, panel, r0, k0, kn, first, t, z0, live);
  }
}

#else  // portable: the same partial sums, one element at a time

inline void panel_times_x(const Gemm& a, const float* panel, int64_t r0, int64_t k0, int64_t kn,
                          bool first, int64_t n) {
  for (int64_t t = 0; t < n; ++t)
    for (int rr = 0; rr < kPanelRows && r0 + rr < a.rows; ++rr) {
      float s = 0.0f;
      for (int64_t k = 0; k < kn; ++k) s += panel[k * kPanelRows + rr] * a.x[t * a.ldx + k0 + k];
      float& o = a.out[t * a.rows + r0 + rr];
      o = first ? s + (a.bias ? a.bias[r0 + rr] : 0.0f) : o + s;
    }
}

#endif

}  // namespace qmpi::cpu::panel
