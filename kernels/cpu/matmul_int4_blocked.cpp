// The prefill int4 matmul: the GEMV's register tile made wider in x (2 weight rows x 8 rows of
// x, 16 accumulators), so each dequantized weight vector feeds 8 FMAs, and blocked over tokens
// so that a block of x planes stays in L2 while every row tile of a thread passes over it. The
// weights are never dequantized to memory and x is packed once per call, not per block.
#include <algorithm>

#include "kernels/cpu/matmul_int4.h"
#include "kernels/cpu/matmul_int4_tile.h"
#include "kernels/cpu/parallel.h"

namespace qmpi::cpu {
namespace {

// x plane bytes per token block: half of a Zen 4 core's 1 MiB L2, leaving room for the weights
// streaming through.
constexpr int64_t kXBlockBytes = 512 * 1024;
// Rows per thread share; a multiple of the tile's 2 rows so tiles never straddle threads.
constexpr int64_t kRowQuantum = 4;

}  // namespace

void matmul_int4_blocked(const float* x, int64_t n, const Int4WeightView& w, const WeightView* bias,
                         float* out, const MatmulOptions& opt) {
  const int64_t row_bytes = 8 * int4::plane_stride(w) * int64_t(sizeof(float));
  const int64_t block = std::max<int64_t>(8, kXBlockBytes / row_bytes / 8 * 8);
  int4::parallel_rows(x, n, w, bias, out, resolve_threads(opt.threads), kRowQuantum,
                      [n, block](const int4::TileArgs& a, int64_t r0, int64_t r1) {
                        for (int64_t i0 = 0; i0 < n; i0 += block)
                          int4::rows_range<2, 8, true>(a, r0, r1, i0, std::min(n, i0 + block));
                      });
}

}  // namespace qmpi::cpu
