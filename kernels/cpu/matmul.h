// out[n, N] = x[n, K] . W[N, K]^T (+ bias) with W in BF16, F16 or F32 and x, out in float32.
//
// Two paths: a GEMV that streams every weight row once for all rows of x (decode: the op is
// bound by memory bandwidth), and a blocked GEMM over packed panels (prefill: bound by
// arithmetic). matmul() picks one by n.
#pragma once
#include <cstdint>
#include <span>

#include "kernels/kernel_types.h"

namespace qmpi::cpu {

struct MatmulOptions {
  int threads = 0;  // 0 = OpenMP default
  // For BF16 weights, round activations to bf16 and use bf16 dot products (VDPBF16PS where the
  // CPU has it). Faster prefill, but each product carries the activation's rounding error
  // (about 2^-9 relative); off = exact float32 activations.
  bool bf16_activations = false;
};

// Up to this many rows of x, matmul() uses the GEMV path (rows of x against each weight row,
// reduced across lanes), beyond it the blocked one (tokens across lanes, no reductions, one
// widening of each weight block). Where they cross was measured with qmpi_kernel_bench (CPU
// time per pass over a decode step's weights, docs/perf.md): exact float32 at 16 rows (the two
// cost the same there). bf16 dot products: since the 16-token tile feeds two sets of
// accumulators (matmul_blocked.cpp), one thread over an 8192 x 4864 weight takes 3.58 ms blocked
// against the GEMV's 4.30 at 8 rows, 3.66 against 3.80 at 6, 3.55 against 3.09 at 4.
inline constexpr int64_t kGemvMaxRows = 16;
inline constexpr int64_t kGemvMaxRowsBf16 = 7;

// Checks shapes and dtypes (raising a qmpi::Error) and runs the path that suits n.
void matmul(const float* x, int64_t n, const WeightView& w, const WeightView* bias, float* out,
            const MatmulOptions& opt);

// Several weights of the same x (q/k/v, gate/up) in one OpenMP region: x is packed once and the
// rows of all targets are split over the threads together, so a decode step pays one fork/join
// and one barrier per group instead of one per weight. Every output element is the dot product
// matmul() computes, bit for bit. Targets that differ in dtype or width run one by one.
void matmul_group(const float* x, int64_t n, std::span<const MatmulTarget> targets,
                  const MatmulOptions& opt);

// The two paths, for tests and benchmarks; they assume matmul()'s checks passed and that the
// targets share their dtype and width.
void matmul_gemv(const float* x, int64_t n, std::span<const MatmulTarget> targets,
                 const MatmulOptions& opt);
void matmul_blocked(const float* x, int64_t n, std::span<const MatmulTarget> targets,
                    const MatmulOptions& opt);
inline void matmul_gemv(const float* x, int64_t n, const WeightView& w, const WeightView* bias,
                        float* out, const MatmulOptions& opt) {
  const MatmulTarget t{w, bias, out};
  matmul_gemv(x, n, {&t, 1}, opt);
}
inline void matmul_blocked(const float* x, int64_t n, const WeightView& w, const WeightView* bias,
                           float* out, const MatmulOptions& opt) {
  const MatmulTarget t{w, bias, out};
  matmul_blocked(x, n, {&t, 1}, opt);
}

}  // namespace qmpi::cpu
