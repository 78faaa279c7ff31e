// The prefill int4 matmul, a float GEMM whose weight panels are dequantized on the way in: each
// thread takes panels of kPanelRows output rows (two Blocks16 blocks); a panel's weights are
// dequantized one chunk of kChunkWords words (128 inputs) at a time into an L1-sized buffer laid
// out input-major (the 32 rows of one input side by side, as the blocks hold them, so one word
// load of 16 rows gives 8 vectors of the buffer), and every token of x multiplies that buffer
// before the next chunk is made. The inner loop is the classic broadcast kernel: two weight vectors
// from L1 and one broadcast of x per token feed 2 FMAs, 24 accumulators in registers. x is read in
// place (gathered once per call only for act-order), never repacked per panel, and no projection is
// ever dequantized whole.
#include <omp.h>

#include <algorithm>
#include <vector>

#include "kernels/cpu/aligned.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/matmul_int4.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/x86.h"
#include "kernels/int4_layout.h"

namespace qmpi::cpu {
namespace {

constexpr int kPanelRows = 32;   // two vectors of output rows
constexpr int kChunkWords = 16;  // 128 inputs: a 16 KiB float panel chunk
constexpr int kTokens = 12;      // tokens per register tile: 24 accumulators

struct PanelArgs {
  const Int4WeightView* w;
  const int32_t* group_of_word;
  const float* x;  // [n][kp], packed-input order
  int64_t kp;
  const float* bias;
  float* out;  // [n][w->rows]
};

#if defined(__AVX512F__)

// Rows [r0, r0 + 32) (zero past the last row), words [c0, c1): dst[(k - 8 c0) * 32 + rr].
void dequantize_chunk(const PanelArgs& a, int64_t r0, int64_t c0, int64_t c1, float* dst) {
  const Int4WeightView& w = *a.w;
  for (int64_t h = 0; h < kPanelRows; h += kInt4Block) {
    const int64_t r = r0 + h;
    if (r >= w.rows) {
      for (int64_t k = 0; k < (c1 - c0) * 8; ++k)
        _mm512_store_ps(dst + k * kPanelRows + h, _mm512_setzero_ps());
      continue;
    }
    // Lanes past the last row load zeros: their panel entries are (0 - 0) * 0.
    const int64_t width = int4_block_width(w.rows, r);
    const __mmask16 m = __mmask16((1u << width) - 1);
    for (int64_t v = c0; v < c1; ++v) {
      const int64_t g = a.group_of_word[v];
      const __m512 s =
          _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, w.scales + r * w.groups + g * width));
      const __m512 z = _mm512_cvtepi32_ps(
          _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, w.zeros + r * w.groups + g * width)));
      const __m512i words = _mm512_maskz_loadu_epi32(m, w.qweight + r * w.words + v * width);
      float* d = dst + (v - c0) * 8 * kPanelRows + h;
      for (int j = 0; j < 8; ++j) {
        const __m512 q = _mm512_cvtepi32_ps(
            _mm512_and_si512(_mm512_srli_epi32(words, unsigned(4 * j)), _mm512_set1_epi32(15)));
        _mm512_store_ps(d + j * kPanelRows, _mm512_mul_ps(_mm512_sub_ps(q, z), s));
      }
    }
  }
}

// Tokens [t0, t0 + T) times the chunk; the first chunk of a panel stores (with the bias), the
// others add, so each output is a sum of per-chunk partial sums.
template <int T>
void tokens_tile(const PanelArgs& a, const float* panel, int64_t r0, int64_t c0, int64_t c1,
                 int64_t t0, __mmask16 m0, __mmask16 m1) {
  const int64_t k0 = c0 * 8, kn = (c1 - c0) * 8, N = a.w->rows;
  __m512 acc[T][2];
  for (int t = 0; t < T; ++t) acc[t][0] = acc[t][1] = _mm512_setzero_ps();
  for (int64_t k = 0; k < kn; ++k) {
    const __m512 w0 = _mm512_load_ps(panel + k * kPanelRows);
    const __m512 w1 = _mm512_load_ps(panel + k * kPanelRows + 16);
    for (int t = 0; t < T; ++t) {
      const __m512 xb = _mm512_set1_ps(a.x[(t0 + t) * a.kp + k0 + k]);
      acc[t][0] = _mm512_fmadd_ps(w0, xb, acc[t][0]);
      acc[t][1] = _mm512_fmadd_ps(w1, xb, acc[t][1]);
    }
  }
  for (int t = 0; t < T; ++t) {
    float* o = a.out + (t0 + t) * N + r0;
    if (c0 == 0) {
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

void chunk_times_x(const PanelArgs& a, const float* panel, int64_t r0, int64_t c0, int64_t c1,
                   int64_t n) {
  const int64_t live = std::min<int64_t>(kPanelRows, a.w->rows - r0);
  const __mmask16 m0 = live >= 16 ? __mmask16(0xffff) : __mmask16((1u << live) - 1);
  const __mmask16 m1 = live >= 32   ? __mmask16(0xffff)
                       : live <= 16 ? __mmask16(0)
                                    : __mmask16((1u << (live - 16)) - 1);
  int64_t t = 0;
  for (; t + kTokens <= n; t += kTokens) tokens_tile<kTokens>(a, panel, r0, c0, c1, t, m0, m1);
  for (; t + 4 <= n; t += 4) tokens_tile<4>(a, panel, r0, c0, c1, t, m0, m1);
  for (; t < n; ++t) tokens_tile<1>(a, panel, r0, c0, c1, t, m0, m1);
}

#else  // portable: the same panel and partial sums, one element at a time

void dequantize_chunk(const PanelArgs& a, int64_t r0, int64_t c0, int64_t c1, float* dst) {
  const Int4WeightView& w = *a.w;
  for (int rr = 0; rr < kPanelRows; ++rr) {
    const int64_t r = r0 + rr;
    for (int64_t v = c0; v < c1; ++v) {
      float* d = dst + (v - c0) * 8 * kPanelRows + rr;
      if (r < w.rows)
        dequantize_int4_word(w, r, v, a.group_of_word[v], d, kPanelRows);
      else
        for (int j = 0; j < 8; ++j) d[j * kPanelRows] = 0.0f;
    }
  }
}

void chunk_times_x(const PanelArgs& a, const float* panel, int64_t r0, int64_t c0, int64_t c1,
                   int64_t n) {
  const int64_t k0 = c0 * 8, kn = (c1 - c0) * 8, N = a.w->rows;
  for (int64_t t = 0; t < n; ++t)
    for (int rr = 0; rr < kPanelRows && r0 + rr < N; ++rr) {
      float s = 0.0f;
      for (int64_t k = 0; k < kn; ++k) s += panel[k * kPanelRows + rr] * a.x[t * a.kp + k0 + k];
      float& o = a.out[t * N + r0 + rr];
      o = c0 == 0 ? s + (a.bias ? a.bias[r0 + rr] : 0.0f) : o + s;
    }
}

#endif

}  // namespace

void matmul_int4_blocked(const float* x, int64_t n, const Int4WeightView& w, const WeightView* bias,
                         float* out, const MatmulOptions& opt) {
  const int64_t kp = w.words * 8;
  AlignedArray<float> xg;
  if (w.x_index || kp != w.in_features) {
    xg = make_aligned<float>(size_t(n * kp));
    gather_int4_input(x, n, w, xg.get());
  }
  std::vector<int32_t> group_of_word(size_t(w.words));
  for (int64_t g = 0; g < w.groups; ++g)
    std::fill(group_of_word.begin() + w.group_words[g],
              group_of_word.begin() + w.group_words[g + 1], int32_t(g));
  const AlignedArray<float> b = widen(bias);
  const PanelArgs a{&w, group_of_word.data(), xg ? xg.get() : x, kp, b.get(), out};
  const int nt = resolve_threads(opt.threads);
#pragma omp parallel num_threads(nt)
  {
    AlignedArray<float> panel = make_aligned<float>(size_t(kChunkWords * 8 * kPanelRows));
    const Range rr = split_range(w.rows, kPanelRows, omp_get_thread_num(), omp_get_num_threads());
    for (int64_t r0 = rr.begin; r0 < rr.end; r0 += kPanelRows)
      for (int64_t c0 = 0; c0 < w.words; c0 += kChunkWords) {
        const int64_t c1 = std::min<int64_t>(w.words, c0 + kChunkWords);
        dequantize_chunk(a, r0, c0, c1, panel.get());
        chunk_times_x(a, panel.get(), r0, c0, c1, n);
      }
  }
}

}  // namespace qmpi::cpu
