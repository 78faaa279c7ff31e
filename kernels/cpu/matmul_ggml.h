// out[n, rows] = x[n, cols] . W^T (+ bias) for a GGUF weight (GgmlWeightView, core/ggml_types.h)
// of any weight type, x and out float32, accumulated in float32.
//
// The weight is decoded one block at a time into a small buffer that the rows of x then use, so
// no projection is ever dequantized whole. A float64 reference sits beside it for the tests.
#pragma once
#include <cstdint>

#include "core/ggml_types.h"
#include "kernels/cpu/matmul.h"
#include "kernels/kernel_types.h"

namespace qmpi::cpu {

// Checks the view and bias (raising a qmpi::Error) and runs the path that suits n.
void matmul_ggml(const float* x, int64_t n, const GgmlWeightView& w, const WeightView* bias,
                 float* out, const MatmulOptions& opt);

// The plain path (every type): one weight block decoded to float32, then used by every row of x.
// Assumes matmul_ggml()'s checks passed.
void matmul_ggml_plain(const float* x, int64_t n, const GgmlWeightView& w, const WeightView* bias,
                       float* out, const MatmulOptions& opt);

// The reference: each weight decoded by dequantize_ggml_block, products summed in float64.
void matmul_ggml_reference(const float* x, int64_t n, const GgmlWeightView& w,
                           const WeightView* bias, float* out);

}  // namespace qmpi::cpu
