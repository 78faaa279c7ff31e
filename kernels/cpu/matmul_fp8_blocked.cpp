// The prefill FP8 matmul. With bf16 activations it runs the bf16 GEMM's tiles on rows decoded
// to bf16 (Fp8Rows below, scaled_rows.h). With float32 ones each thread takes panels of
// kPanelRows output rows; a panel's weights are decoded one run of inputs at a time (one scale
// block, at most kChunk inputs) in registers (or through the e4m3 table) into an L1 panel laid
// out input-major, scaled there, and every token of x multiplies that panel (panel_times_x.h)
// before the next run is decoded. x is read in place.
#include <algorithm>
#include <vector>

#include "kernels/cpu/aligned.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/e4m3_simd.h"
#include "kernels/cpu/matmul_fp8.h"
#include "kernels/cpu/panel_times_x.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/scaled_rows.h"
#include "kernels/cpu/vec.h"

namespace qmpi::cpu {
namespace {

using panel::kPanelRows;
constexpr int64_t kChunk = 128;  // inputs per panel: 16 KiB of floats

// Rows [r0, r0 + kPanelRows) (zero past the last row), inputs [k0, k1) (one scale column):
// dst[(k - k0) * kPanelRows + rr].
void decode_chunk(const Fp8WeightView& w, int64_t r0, int64_t k0, int64_t k1, float* dst) {
#if defined(QMPI_CPU_VEC)
  // kLanes rows x 2 kLanes codes at a time, decoded in registers (values times 2^-8, scaled by
  // the block's scale times 2^8: the same single rounding as the table's value times the scale)
  // and transposed into the panel's input-major rows. The table, one element at a time, cost
  // more instructions per weight than the GEMM's FMAs on it at 128 tokens.
  constexpr int64_t kL = vec::kLanes;
  for (int64_t h = 0; h < kPanelRows; h += kL) {
    float scale[kL];  // the rows' block scales times 2^8
    for (int64_t i = 0; i < kL; ++i)
      scale[i] = r0 + h + i < w.rows ? fp8_scale(w, r0 + h + i, k0) * 256.0f : 0.0f;
    for (int64_t k = k0; k < k1; k += 2 * kL) {
      const int64_t n = std::min(2 * kL, k1 - k);
      vec::F lo[kL], hi[kL];
      for (int64_t i = 0; i < kL; ++i) {
        const int64_t r = r0 + h + i;
        if (r >= w.rows) {
          lo[i] = hi[i] = vec::zero();
          continue;
        }
        const uint8_t* q = w.q + r * w.cols + k;
        const E4m3Pair v = n == 2 * kL ? e4m3_load(q) : e4m3_load_first(q, int(n));
        lo[i] = vec::mul(v.lo, vec::splat(scale[i]));
        hi[i] = vec::mul(v.hi, vec::splat(scale[i]));
      }
      vec::transpose(lo);
      vec::transpose(hi);
      for (int64_t j = 0; j < kL && j < n; ++j)
        vec::store(dst + (k - k0 + j) * kPanelRows + h, lo[j]);
      for (int64_t j = 0; j < kL && kL + j < n; ++j)
        vec::store(dst + (k - k0 + kL + j) * kPanelRows + h, hi[j]);
    }
  }
#else
  const float* lut = e4m3_table();
  for (int rr = 0; rr < kPanelRows; ++rr) {
    const int64_t r = r0 + rr;
    if (r >= w.rows) {
      for (int64_t k = k0; k < k1; ++k) dst[(k - k0) * kPanelRows + rr] = 0.0f;
      continue;
    }
    const float s = fp8_scale(w, r, k0);
    const uint8_t* q = w.q + r * w.cols;
    for (int64_t k = k0; k < k1; ++k) dst[(k - k0) * kPanelRows + rr] = lut[q[k]] * s;
  }
#endif
}

// The weight for the bf16 tiles: a row's codes as bf16 bits times 2^-8 (e4m3_simd.h), each scale
// times 2^8.
struct Fp8Rows final : ScaledRows {
  const Fp8WeightView& w;
  explicit Fp8Rows(const Fp8WeightView& v) : w(v) {
    rows = w.rows, cols = w.cols, blocks = (w.cols + w.col_offset + w.block_k - 1) / w.block_k;
    bytes = reinterpret_cast<const char*>(w.q), row_bytes = w.cols;
  }
  int64_t block_start(int64_t b) const override {
    return b == 0 ? 0 : std::min(w.cols, b * w.block_k - w.col_offset);
  }
  void decode(int64_t r0, int mr, int64_t ld, uint16_t* dst, float* scales,
              int64_t stride) const override {
    for (int i = 0; i < mr; ++i) e4m3_to_bf16(w.q + (r0 + i) * w.cols, w.cols, dst + i * ld);
    for (int i = 0; i < mr; ++i) {  // the slice's scale block b is column b of its scale row
      const float* srow = w.scales + (r0 + i + w.row_offset) / w.block_n * w.scale_cols;
      for (int64_t b = 0; b < blocks; ++b) scales[b * stride + i] = srow[b] * 256.0f;
    }
  }
};

}  // namespace

bool matmul_fp8_blocked_bf16(const float* x, int64_t n, std::span<const Fp8Target> targets,
                             const MatmulOptions& opt) {
  std::vector<Fp8Rows> rows;
  rows.reserve(targets.size());  // the targets point into it
  std::vector<ScaledTarget> ts;
  for (const Fp8Target& t : targets) {
    // A pair of inputs must share its scale (every block edge at an even input), and the targets
    // their x.
    if (t.w.block_k % 2 || t.w.col_offset % 2 || t.w.cols != targets[0].w.cols) return false;
    ts.push_back({&rows.emplace_back(t.w), t.bias, t.out});
  }
  matmul_blocked_scaled(x, n, ts, opt);
  return true;
}

void matmul_fp8_blocked(const float* x, int64_t n, const Fp8WeightView& w, const WeightView* bias,
                        float* out, const MatmulOptions& opt) {
  const Fp8Target t{w, bias, out};
  if (opt.bf16_activations && matmul_fp8_blocked_bf16(x, n, {&t, 1}, opt)) return;
  const AlignedArray<float> b = widen(bias);
  const panel::Gemm g{x, w.cols, b.get(), out, w.rows};
  const int nt = resolve_threads(opt.threads);
#pragma omp parallel num_threads(nt)
  {
    AlignedArray<float> chunk = make_aligned<float>(size_t(kChunk * kPanelRows));
    const Range rr = split_range(w.rows, kPanelRows, omp_get_thread_num(), omp_get_num_threads());
    for (int64_t r0 = rr.begin; r0 < rr.end; r0 += kPanelRows)
      for (int64_t k0 = 0; k0 < w.cols;) {
        const int64_t k1 = std::min(fp8_block_end(w, k0), k0 + kChunk);
        decode_chunk(w, r0, k0, k1, chunk.get());
        panel::panel_times_x(g, chunk.get(), r0, k0, k1 - k0, k0 == 0, n);
        k0 = k1;
      }
  }
}

}  // namespace qmpi::cpu
