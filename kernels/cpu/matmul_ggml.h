// out[n, rows] = x[n, cols] . W^T (+ bias) for a GGUF weight (GgmlWeightView, core/ggml_types.h)
// of any weight type, x and out float32, accumulated in float32.
//
// Three paths, none of which ever dequantizes a projection whole: for decode (n <= kGemvMaxRows)
// a GEMV that decodes blocks 16 weights at a time in registers (ggml_simd.h, AVX-512); for
// prefill the float panel GEMM (panel_times_x.h) over panels decoded one block column at a time;
// and a plain path (builds without AVX-512, slices of plain floats) that decodes one block into a
// stack buffer that every row of x then uses. F32/F16/BF16 weights in whole rows go to the dense
// float kernels (matmul.h). With opt.bf16_activations (`--dtype auto`), decode of Q8_0, Q4_0,
// Q5_0, Q4_K and Q6_K quantizes x to int8 and uses integer dot products instead (as llama.cpp does;
// matmul_ggml_int8.cpp states its error bound), and prefill of every type but Q2_K and Q3_K rounds
// x to bf16 for the bf16 GEMM's tiles. A float64 reference sits beside them for tests.
#pragma once
#include <cstdint>

#include "core/ggml_types.h"
#include "kernels/cpu/matmul.h"
#include "kernels/kernel_types.h"

namespace qmpi::cpu {

// Checks the view and bias (raising a qmpi::Error) and runs the path that suits n.
void matmul_ggml(const float* x, int64_t n, const GgmlWeightView& w, const WeightView* bias,
                 float* out, const MatmulOptions& opt);

// The paths, for tests and benchmarks; all assume matmul_ggml()'s checks passed and take every
// weight type (the GEMV runs the plain path for types without a register decoder).
void matmul_ggml_gemv(const float* x, int64_t n, const GgmlWeightView& w, const WeightView* bias,
                      float* out, const MatmulOptions& opt);
void matmul_ggml_blocked(const float* x, int64_t n, const GgmlWeightView& w, const WeightView* bias,
                         float* out, const MatmulOptions& opt);
void matmul_ggml_plain(const float* x, int64_t n, const GgmlWeightView& w, const WeightView* bias,
                       float* out, const MatmulOptions& opt);

// The decode GEMV with x quantized to int8 per 32 elements and integer dot products
// (matmul_ggml_int8.cpp: the method, the error bound), which matmul_ggml() runs up to
// kGemvMaxRows rows of x when opt.bf16_activations is set (`--dtype auto`). False, with nothing
// done, where the type or width has no such kernel (Q8_0, Q4_0, Q5_0 with whole 64-element
// pairs of blocks per row, Q4_K, Q6_K) or the CPU lacks AVX512-VNNI.
bool ggml_int8_supported(const GgmlWeightView& w);
bool matmul_ggml_gemv_int8(const float* x, int64_t n, const GgmlWeightView& w,
                           const WeightView* bias, float* out, const MatmulOptions& opt);

// The prefill with x rounded to bf16 on the bf16 GEMM's tiles (matmul_ggml_bf16.cpp), which
// matmul_ggml() runs above kGemvMaxRows rows of x when opt.bf16_activations is set. False, with
// nothing done, where the type has no such decoder (Q2_K, Q3_K) or the CPU lacks VDPBF16PS.
bool matmul_ggml_blocked_bf16(const float* x, int64_t n, const GgmlWeightView& w,
                              const WeightView* bias, float* out, const MatmulOptions& opt);

// The reference: each weight decoded by dequantize_ggml_block, products summed in float64.
void matmul_ggml_reference(const float* x, int64_t n, const GgmlWeightView& w,
                           const WeightView* bias, float* out);

}  // namespace qmpi::cpu
