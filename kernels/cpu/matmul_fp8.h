// out[n, N] = x[n, K] . W^T (+ bias) for a block-wise FP8 weight (Fp8WeightView), x and out
// float32, accumulated in float32.
//
// Two paths, as for int4: a GEMV for decode that decodes each e4m3 byte in registers (32 at a
// time, through the F16C conversion) against x already multiplied by the block row's scales, so
// the op streams one byte per weight; and for prefill a GEMM: with bf16 activations the bf16
// GEMM's VDPBF16PS tiles on a few rows at a time decoded to bf16, else a float GEMM whose weight
// panels are decoded one block of inputs at a time into an L1 panel (panel_times_x.h). No
// projection is ever dequantized whole. A plain reference sits beside them for the tests.
#pragma once
#include <cstdint>
#include <span>

#include "kernels/cpu/matmul.h"
#include "kernels/kernel_types.h"

namespace qmpi::cpu {

// Checks the view and bias (raising a qmpi::Error) and runs the path that suits n.
void matmul_fp8(const float* x, int64_t n, const Fp8WeightView& w, const WeightView* bias,
                float* out, const MatmulOptions& opt);
// Several projections of the same x (q/k/v, gate/up), as matmul_group is for float weights: x is
// scaled or packed once per thread for all of them, and the threads share out their rows
// together, with one fork and join instead of one per projection.
void matmul_fp8_group(const float* x, int64_t n, std::span<const Fp8Target> targets,
                      const MatmulOptions& opt);

// The two paths, for tests and benchmarks; both assume matmul_fp8()'s checks passed.
void matmul_fp8_gemv(const float* x, int64_t n, const Fp8WeightView& w, const WeightView* bias,
                     float* out, const MatmulOptions& opt);
void matmul_fp8_blocked(const float* x, int64_t n, const Fp8WeightView& w, const WeightView* bias,
                        float* out, const MatmulOptions& opt);

// With bf16 activations, the blocked path runs the bf16 GEMM's tiles (matmul_blocked.cpp; the
// float32 ones without VDPBF16PS) on rows decoded to bf16, scaled per block as their sums are
// added up; false (nothing done) where it cannot: scale block edges at odd inputs, or targets of
// different widths.
bool matmul_fp8_blocked_bf16(const float* x, int64_t n, std::span<const Fp8Target> targets,
                             const MatmulOptions& opt);

// The plain reference: every weight decoded through e4m3_to_f32, products summed in float64.
void matmul_fp8_reference(const float* x, int64_t n, const Fp8WeightView& w, const WeightView* bias,
                          float* out);

// The 256 e4m3 codes as float32 (NaN for 0x7f and 0xff).
const float* e4m3_table();

// The scale of weight (r, c).
inline float fp8_scale(const Fp8WeightView& w, int64_t r, int64_t c) {
  return w.scales[((r + w.row_offset) / w.block_n) * w.scale_cols + (c + w.col_offset) / w.block_k];
}

// The end of the run of inputs from c that shares c's scale column (the next block edge).
inline int64_t fp8_block_end(const Fp8WeightView& w, int64_t c) {
  const int64_t e = ((c + w.col_offset) / w.block_k + 1) * w.block_k - w.col_offset;
  return e < w.cols ? e : w.cols;
}

}  // namespace qmpi::cpu
