// The inner GEMM of the quantized prefill matmuls (int4 and FP8): a chunk of kPanelRows output
// rows x kn inputs of the weight, already dequantized into an L1-sized float panel laid out
// input-major (panel[k * kPanelRows + rr]), times every token of x. The classic broadcast kernel:
// two weight vectors from L1 and one broadcast of x per token feed 2 FMAs, 24 accumulators in
// registers. The first chunk of a panel stores (with the bias), the others add, so each output
// is a sum of per-chunk partial sums.
#pragma once
#include <algorithm>
#include <cstdint>

#include "kernels/cpu/x86.h"

namespace qmpi::cpu::panel {

inline constexpr int kPanelRows = 32;  // two vectors of output rows
inline constexpr int kTokens = 12;     // tokens per register tile: 24 accumulators

struct Gemm {
  const float* x;  // [n][ldx]
  int64_t ldx;
  const float* bias;  // [rows] or null
  float* out;         // [n][rows]
  int64_t rows;
};

#if defined(__AVX512F__)

template <int T>
void tokens_tile(const Gemm& a, const float* panel, int64_t r0, int64_t k0, int64_t kn, bool first,
                 int64_t t0, __mmask16 m0, __mmask16 m1) {
  __m512 acc[T][2];
  for (int t = 0; t < T; ++t) acc[t][0] = acc[t][1] = _mm512_setzero_ps();
  for (int64_t k = 0; k < kn; ++k) {
    const __m512 w0 = _mm512_load_ps(panel + k * kPanelRows);
    const __m512 w1 = _mm512_load_ps(panel + k * kPanelRows + 16);
    for (int t = 0; t < T; ++t) {
      const __m512 xb = _mm512_set1_ps(a.x[(t0 + t) * a.ldx + k0 + k]);
      acc[t][0] = _mm512_fmadd_ps(w0, xb, acc[t][0]);
      acc[t][1] = _mm512_fmadd_ps(w1, xb, acc[t][1]);
    }
  }
  for (int t = 0; t < T; ++t) {
    float* o = a.out + (t0 + t) * a.rows + r0;
    if (first) {
      const __m512 b0 = a.bias ? _mm512_maskz_loadu_ps(m0, a.bias + r0) : _mm512_setzero_ps();
      const __m512 b1 = a.bias ? _mm512_maskz_loadu_ps(m1, a.bias + r0 + 16) : _mm512_setzero_ps();
      _mm512_mask_storeu_ps(o, m0, _mm512_add_ps(acc[t][0], b0));
      _mm512_mask_storeu_ps(o + 16, m1, _mm512_add_ps(acc[t][1], b1));
    } else {
      _mm512_mask_storeu_ps(o, m0, _mm512_add_ps(acc[t][0], _mm512_maskz_loadu_ps(m0, o)));
      _mm512_mask_storeu_ps(o + 16, m1,
                            _mm512_add_ps(acc[t][1], _mm512_maskz_loadu_ps(m1, o + 16)));
    }
  }
}

// Rows [r0, r0 + kPanelRows) (those below a.rows) of out for inputs [k0, k0 + kn) of x.
inline void panel_times_x(const Gemm& a, const float* panel, int64_t r0, int64_t k0, int64_t kn,
                          bool first, int64_t n) {
  const int64_t live = std::min<int64_t>(kPanelRows, a.rows - r0);
  const __mmask16 m0 = live >= 16 ? __mmask16(0xffff) : __mmask16((1u << live) - 1);
  const __mmask16 m1 = live >= 32   ? __mmask16(0xffff)
                       : live <= 16 ? __mmask16(0)
                                    : __mmask16((1u << (live - 16)) - 1);
  int64_t t = 0;
  for (; t + kTokens <= n; t += kTokens)
    tokens_tile<kTokens>(a, panel, r0, k0, kn, first, t, m0, m1);
  for (; t + 4 <= n; t += 4) tokens_tile<4>(a, panel, r0, k0, kn, first, t, m0, m1);
  for (; t < n; ++t) tokens_tile<1>(a, panel, r0, k0, kn, first, t, m0, m1);
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
