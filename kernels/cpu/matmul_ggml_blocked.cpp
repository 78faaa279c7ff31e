// The GGUF prefill matmul, the float GEMM of panel_times_x.h with its weight panels decoded on the
// way in: each thread takes panels of kPanelRows output rows; for each column of kColumn inputs
// (one k-quant super-block, eight 32-element blocks) the panel's rows are decoded 16 at a time
// into a staging buffer (ggml_simd.h where the type has a decoder, else the plain decoders),
// turned input-major by 16x16 register transposes, and every token of x multiplies the panel
// before the next column is decoded. x is read in place; no projection is dequantized whole.
#include <omp.h>

#include <algorithm>

#include "kernels/cpu/aligned.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/ggml_dequant.h"
#include "kernels/cpu/ggml_simd.h"
#include "kernels/cpu/matmul_ggml.h"
#include "kernels/cpu/panel_times_x.h"
#include "kernels/cpu/parallel.h"

namespace qmpi::cpu {
namespace {

using panel::kPanelRows;
constexpr int64_t kColumn = 256;  // inputs per panel: 32 KiB of floats, a k-quant block
constexpr int kStageRows = 16;

// dst[0, kn) = inputs [k0, k0 + kn) of row r (k0 and kn whole blocks).
void decode_run(const GgmlWeightView& w, const GgmlTypeInfo& t, int64_t r, int64_t k0, int64_t kn,
                float* dst) {
  const uint8_t* src = w.data + r * w.row_bytes + ggml_bytes(t, k0);
#if defined(QMPI_GGML_SIMD)
  const bool simd = ggml_simd::with_decoder(w.type, [&](auto d) {
    using D = decltype(d);
    for (int64_t k = 0; k < kn; k += D::kElems)
      D::block(src + k / D::kElems * D::kBytes,
               [&](int c, ggml_simd::Chunk v) { ggml_simd::store(dst + k + 16 * c, v); });
  });
  if (simd) return;
#endif
  dequantize_ggml_row(w.type, src, dst, kn);
}

#if defined(__AVX512F__)

// r[16] rows of 16 -> its transpose, by swapping the off-diagonal b x b sub-blocks of every
// 2b x 2b block for b = 8, 4, 2, 1 (rows i and i + b trade their column blocks).
inline void transpose16(__m512 r[16]) {
#pragma GCC unroll 4
  for (int b = 8; b >= 1; b /= 2) {
    alignas(64) int32_t lo[16], hi[16];
    for (int c = 0; c < 16; ++c) {
      lo[c] = c & b ? 16 + c - b : c;
      hi[c] = c & b ? 16 + c : c + b;
    }
    const __m512i vlo = _mm512_load_si512(lo), vhi = _mm512_load_si512(hi);
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i)
      if (!(i & b)) {
        const __m512 a = r[i], c = r[i + b];
        r[i] = _mm512_permutex2var_ps(a, vlo, c);
        r[i + b] = _mm512_permutex2var_ps(a, vhi, c);
      }
  }
}

#endif

// panel[k * kPanelRows + h + i] = stage[i * kColumn + k] for i < 16, k < kn.
void stage_to_panel(const float* stage, int64_t kn, int h, float* panel) {
  int64_t k = 0;
#if defined(__AVX512F__)
  for (; k + 16 <= kn; k += 16) {
    __m512 r[16];
    for (int i = 0; i < 16; ++i) r[i] = _mm512_load_ps(stage + i * kColumn + k);
    transpose16(r);
    for (int j = 0; j < 16; ++j) _mm512_store_ps(panel + (k + j) * kPanelRows + h, r[j]);
  }
#endif
  for (; k < kn; ++k)
    for (int i = 0; i < kStageRows; ++i) panel[k * kPanelRows + h + i] = stage[i * kColumn + k];
}

// Rows [r0, r0 + kPanelRows) (zero past the last row), inputs [k0, k0 + kn), input-major.
void decode_panel(const GgmlWeightView& w, const GgmlTypeInfo& t, int64_t r0, int64_t k0,
                  int64_t kn, float* stage, float* panel) {
  for (int h = 0; h < kPanelRows; h += kStageRows) {
    for (int i = 0; i < kStageRows; ++i) {
      float* dst = stage + i * kColumn;
      if (r0 + h + i < w.rows)
        decode_run(w, t, r0 + h + i, k0, kn, dst);
      else
        std::fill(dst, dst + kn, 0.0f);
    }
    stage_to_panel(stage, kn, h, panel);
  }
}

}  // namespace

void matmul_ggml_blocked(const float* x, int64_t n, const GgmlWeightView& w, const WeightView* bias,
                         float* out, const MatmulOptions& opt) {
  const GgmlTypeInfo& t = *ggml_type_info(uint32_t(w.type));
  const AlignedArray<float> b = widen(bias);
  const panel::Gemm g{x, w.cols, b.get(), out, w.rows};
  const int nt = resolve_threads(opt.threads);
#pragma omp parallel num_threads(nt)
  {
    AlignedArray<float> panel = make_aligned<float>(size_t(kColumn * kPanelRows));
    AlignedArray<float> stage = make_aligned<float>(size_t(kStageRows * kColumn));
    const Range rr = split_range(w.rows, kPanelRows, omp_get_thread_num(), omp_get_num_threads());
    for (int64_t r0 = rr.begin; r0 < rr.end; r0 += kPanelRows)
      for (int64_t k0 = 0; k0 < w.cols; k0 += kColumn) {
        const int64_t kn = std::min(kColumn, w.cols - k0);
        decode_panel(w, t, r0, k0, kn, stage.get(), panel.get());
        panel::panel_times_x(g, panel.get(), r0, k0, kn, k0 == 0, n);
      }
  }
}

}  // namespace qmpi::cpu
