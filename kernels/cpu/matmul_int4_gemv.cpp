// The decode-time int4 matmul: tiles of kRows weight rows, each weight word read once from
// DRAM (prefetched into L2 ahead of use) and dequantized in registers for up to 4 rows of x at
// a time, so the op streams half a byte per weight. From 5 rows of x (batched decode) the tiles
// are 2 weight rows x 8 rows of x: each dequantized vector then feeds 8 FMAs, not 4. One parallel
// region per call: x is packed into planes, then each thread takes a contiguous run of row tiles.
#include "kernels/cpu/matmul_int4.h"
#include "kernels/cpu/matmul_int4_tile.h"
#include "kernels/cpu/parallel.h"

namespace qmpi::cpu {
namespace {

// Four rows give four independent FMA chains per x row and share each x load.
constexpr int kRows = 4;
// Below this many weights per thread, extra threads cost more than they bring.
constexpr int64_t kGrain = 64 * 1024;

}  // namespace

void matmul_int4_gemv(const float* x, int64_t n, const Int4WeightView& w, const WeightView* bias,
                      float* out, const MatmulOptions& opt) {
  const int nt = threads_for(opt.threads, w.rows * w.words * 8, kGrain);
  int4::parallel_rows(x, n, w, bias, out, nt, kRows,
                      [n](const int4::TileArgs& a, int64_t r0, int64_t r1) {
                        if (n <= 4)
                          int4::rows_range<kRows, 4, true>(a, r0, r1, 0, n);
                        else
                          int4::rows_range<2, 8, true>(a, r0, r1, 0, n);
                      });
}

}  // namespace qmpi::cpu
