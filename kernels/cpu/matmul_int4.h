// out[n, N] = x[n, K] . W^T (+ bias) for an int4 weight (Int4WeightView: AWQ and GPTQ
// checkpoints both arrive in its layout), x and out float32, accumulated in float32.
//
// Two paths, as for the float matmul: a GEMV for decode that dequantizes each weight word in
// registers (matmul_int4_tile.h; with bf16 activations on AVX2, on int16 activations:
// matmul_int4_int16.cpp), and for prefill a GEMM: with bf16 activations the bf16 GEMM's
// VDPBF16PS tiles (AVX2: its float32 tiles) on a few rows at a time decoded to bf16 q - z, each
// group's sums scaled (matmul_int4_bf16.cpp), else a float GEMM that dequantizes its weight panels
// a 16 KiB chunk at a time. Both read the Blocks16 layout (the CPU backend's). A plain reference,
// which reads either layout, sits beside them for the tests.
#pragma once
#include <cstdint>
#include <span>

#include "kernels/cpu/aligned.h"
#include "kernels/cpu/dot_products.h"
#include "kernels/cpu/matmul.h"
#include "kernels/kernel_types.h"

namespace qmpi::cpu {

// Up to this many rows of x, matmul_int4() runs the GEMV (each 16-row block's words read once
// from memory, dequantized in registers for 8 rows of x at a time, the block re-read from cache
// for the next 8); beyond it the panel GEMM. The GEMV's cost grows by a few ms per row over a
// decode step's projections where the GEMM's starts ~50% higher at 17 rows
// (qmpi_kernel_bench --int4 awq, docs/perf.md), so batched decode up to 64 sequences stays on it.
inline constexpr int64_t kInt4GemvMaxRows = 64;
// With bf16 activations the bf16 tiles (matmul_int4_bf16.cpp) take over above this many rows:
// CPU ms of 24 layers' projections at 1 thread, GEMV against tiles, 20 rows 94 / 112, 24 rows
// 101 / 110, 28 rows 126 / 112, 32 rows 132 / 112 (qmpi_kernel_bench --int4 awq
// --bf16-activations). The tiles' cost hardly moves below 32 rows: decoding the weights to bf16
// is most of it there. The float32 tiles (AVX2) stay behind the GEMV up to its 64 rows: the 0.5B's
// projections, 2 threads, tiles / GEMV 192 / 134 ms at 25 rows, 195 / 166 at 32, 374 / 359 at 64.
inline constexpr int64_t kInt4GemvMaxRowsBf16 = kHaveBf16Dot ? 24 : kInt4GemvMaxRows;

// Checks the view and bias (raising a qmpi::Error) and runs the path that suits n.
void matmul_int4(const float* x, int64_t n, const Int4WeightView& w, const WeightView* bias,
                 float* out, const MatmulOptions& opt);
// matmul_int4 for projections of the same x (q/k/v, gate/up). Where they read x alike (same
// inputs, groups and input order), the int16-activation GEMV quantizes x once and the bf16 tiles
// pack it once for all of them, in one parallel region; else one matmul_int4 per target.
void matmul_int4_group(const float* x, int64_t n, std::span<const Int4Target> targets,
                       const MatmulOptions& opt);

// The two paths, for tests and benchmarks; both assume matmul_int4()'s checks passed.
void matmul_int4_gemv(const float* x, int64_t n, const Int4WeightView& w, const WeightView* bias,
                      float* out, const MatmulOptions& opt);
void matmul_int4_blocked(const float* x, int64_t n, const Int4WeightView& w, const WeightView* bias,
                         float* out, const MatmulOptions& opt);

// Up to this many rows of x (with bf16 activations) the int16-activation GEMV runs where it
// exists. AVX2 (tiles of 1-2 x rows): the 0.5B's projections, 2 threads, int16 / float GEMV
// 8.4-9.0 / 10.4-10.9 ms at 1 row, 12 / 22 at 2, 20 / 31 at 3, but 22.6 / 21.2 at 4 (the float
// GEMV's 4-row tile), 83 / 82 at 16. AVX-512 (tiles of 1-8 rows, VPDPWSSD): 1 row level (both
// ~24 GB/s, waiting on each word load rather than on instructions), 2 rows 7.9-8.1 / 8.6-9.4, 4
// rows 11.9 / 16.6-17.6, 8 rows 24-26 / 32, 16 rows 49-53 / 62-65, 24 rows 69-86 / 89-96; above 24
// the bf16 tiles take over.
#if defined(__AVX512F__)
inline constexpr int64_t kInt4GemvInt16MaxRows = kInt4GemvMaxRowsBf16;
#else
inline constexpr int64_t kInt4GemvInt16MaxRows = 3;
#endif

// The int16-activation GEMV's levels: x is quantized per segment to q = round(x / dx) with dx =
// max|x| / kInt4ActivationLevels (32639, not 32767: VNNI builds split q into two signed bytes).
inline constexpr float kInt4ActivationLevels = 32639.0f;

// The GEMV with int16 activations (matmul_int4_int16.cpp states the method and its error
// bound), for targets that read x alike (matmul_int4_group); false, with nothing done, where the
// build does not use int16 dot products (dot_products.h).
bool matmul_int4_gemv_int16(const float* x, int64_t n, std::span<const Int4Target> targets,
                            const MatmulOptions& opt);

// The blocked path with bf16 activations (x rounded to bf16, weights exact), for targets that
// read x alike; false, with nothing done, on AVX-512 without VDPBF16PS and on builds without
// AVX2.
bool matmul_int4_blocked_bf16(const float* x, int64_t n, std::span<const Int4Target> targets,
                              const MatmulOptions& opt);

// The plain reference: every weight dequantized, products summed in float64.
void matmul_int4_reference(const float* x, int64_t n, const Int4WeightView& w,
                           const WeightView* bias, float* out);

// Rows [r0, r1) of W (either layout) as float32, in packed-input order: dst[(r - r0) * words * 8 +
// k].
void dequantize_int4_rows(const Int4WeightView& w, int64_t r0, int64_t r1, float* dst);

// The 8 weights of word v of row r (either layout), whose group is g, as float32:
// d[0], d[stride], ..., d[7 * stride]. The one element formula every scalar dequantization uses.
void dequantize_int4_word(const Int4WeightView& w, int64_t r, int64_t v, int64_t g, float* d,
                          int64_t stride);

// x in packed-input order: dst[i * words * 8 + k] = x[i][x_index[k]] (0 where x_index is -1).
void gather_int4_input(const float* x, int64_t n, const Int4WeightView& w, float* dst);

// x itself where it is already in packed-input order, else its gathered copy in `storage`.
const float* packed_int4_input(const float* x, int64_t n, const Int4WeightView& w,
                               AlignedArray<float>& storage);

}  // namespace qmpi::cpu
