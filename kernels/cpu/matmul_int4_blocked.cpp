// The prefill int4 matmul with float32 activations (bf16 ones take the bf16 tiles,
// matmul_int4_bf16.cpp), a float GEMM whose weight panels are dequantized on the way in: each
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
#include "kernels/cpu/matmul_int4_tile.h"
#include "kernels/cpu/panel_times_x.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/x86.h"
#include "kernels/int4_layout.h"

namespace qmpi::cpu {
namespace {

using panel::kPanelRows;
constexpr int kChunkWords = 16;  // 128 inputs: a 16 KiB float panel chunk

struct PanelArgs {
  const Int4WeightView* w;
  const int32_t* group_of_word;
};

// The panel's entries of the block at row h, for n inputs: zero (the block is past the last row).
inline void zero_block(float* dst, int64_t h, int64_t n) {
  for (int64_t k = 0; k < n; ++k) std::fill_n(dst + k * kPanelRows + h, kInt4Block, 0.0f);
}

#if defined(__AVX512F__)

// Rows [r0, r0 + 32) (zero past the last row), words [c0, c1): dst[(k - 8 c0) * 32 + rr].
void dequantize_chunk(const PanelArgs& a, int64_t r0, int64_t c0, int64_t c1, float* dst) {
  const Int4WeightView& w = *a.w;
  for (int64_t h = 0; h < kPanelRows; h += kInt4Block) {
    const int64_t r = r0 + h;
    if (r >= w.rows) {
      zero_block(dst, h, (c1 - c0) * 8);
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

#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

// The same chunk with a block's 16 rows in two vectors of 8 lanes (int4::widen_scales and
// widen_zeros give zeros past the last row, and the masked loads zero words).
void dequantize_chunk(const PanelArgs& a, int64_t r0, int64_t c0, int64_t c1, float* dst) {
  const Int4WeightView& w = *a.w;
  for (int64_t h = 0; h < kPanelRows; h += kInt4Block) {
    const int64_t r = r0 + h;
    if (r >= w.rows) {
      zero_block(dst, h, (c1 - c0) * 8);
      continue;
    }
    const int64_t width = int4_block_width(w.rows, r);
    const __m256i m[2] = {vec::first_lanes(int(width)), vec::first_lanes(int(width - 8))};
    for (int64_t v = c0; v < c1; ++v) {
      const int64_t g = a.group_of_word[v];
      __m256 s[2], z[2];
      int4::widen_scales(w.scales + r * w.groups + g * width, width, s);
      int4::widen_zeros(w.zeros + r * w.groups + g * width, width, z);
      float* d = dst + (v - c0) * 8 * kPanelRows + h;
      for (int half = 0; half < 2; ++half) {
        const __m256i words = _mm256_maskload_epi32(
            reinterpret_cast<const int*>(w.qweight + r * w.words + v * width + 8 * half), m[half]);
        for (int j = 0; j < 8; ++j) {
          const __m256 q = _mm256_cvtepi32_ps(
              _mm256_and_si256(_mm256_srli_epi32(words, 4 * j), _mm256_set1_epi32(15)));
          _mm256_store_ps(d + j * kPanelRows + 8 * half,
                          _mm256_mul_ps(_mm256_sub_ps(q, z[half]), s[half]));
        }
      }
    }
  }
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

#endif

}  // namespace

void matmul_int4_blocked(const float* x, int64_t n, const Int4WeightView& w, const WeightView* bias,
                         float* out, const MatmulOptions& opt) {
  const Int4Target t{w, bias, out};
  if (opt.bf16_activations && matmul_int4_blocked_bf16(x, n, {&t, 1}, opt)) return;
  const int64_t kp = w.words * 8;
  AlignedArray<float> xg;
  const float* xp = packed_int4_input(x, n, w, xg);
  std::vector<int32_t> group_of_word(size_t(w.words));
  for (int64_t g = 0; g < w.groups; ++g)
    std::fill(group_of_word.begin() + w.group_words[g],
              group_of_word.begin() + w.group_words[g + 1], int32_t(g));
  const AlignedArray<float> b = widen(bias);
  const PanelArgs a{&w, group_of_word.data()};
  const panel::Gemm g{xp, kp, b.get(), out, w.rows};
  const int nt = resolve_threads(opt.threads);
#pragma omp parallel num_threads(nt)
  {
    AlignedArray<float> panel = make_aligned<float>(size_t(kChunkWords * 8 * kPanelRows));
    const Range rr = split_range(w.rows, kPanelRows, omp_get_thread_num(), omp_get_num_threads());
    for (int64_t r0 = rr.begin; r0 < rr.end; r0 += kPanelRows)
      for (int64_t c0 = 0; c0 < w.words; c0 += kChunkWords) {
        const int64_t c1 = std::min<int64_t>(w.words, c0 + kChunkWords);
        dequantize_chunk(a, r0, c0, c1, panel.get());
        panel::panel_times_x(g, panel.get(), r0, c0 * 8, (c1 - c0) * 8, c0 == 0, n);
      }
  }
}

}  // namespace qmpi::cpu
