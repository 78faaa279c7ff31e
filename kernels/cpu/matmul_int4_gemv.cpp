// The decode-time int4 matmul: each thread takes a contiguous run of Blocks16 blocks (16 weight
// rows each, one contiguous stream of weights), reads each block's words once from DRAM
// (prefetched into L2 ahead of use) and dequantizes them in registers for up to 8 rows of x at a
// time (matmul_int4_tile.h), so the op streams half a byte per weight. One parallel region per
// call: x is packed first, then the blocks run.
#include "kernels/cpu/matmul_int4.h"
#include "kernels/cpu/matmul_int4_tile.h"
#include "kernels/cpu/parallel.h"

namespace qmpi::cpu {
namespace {

// Below this many weights per thread, extra threads cost more than they bring.
constexpr int64_t kGrain = 64 * 1024;

}  // namespace

void matmul_int4_gemv(const float* x, int64_t n, const Int4WeightView& w, const WeightView* bias,
                      float* out, const MatmulOptions& opt) {
  const int nt = threads_for(opt.threads, w.rows * w.words * 8, kGrain);
  const AlignedArray<float> b = widen(bias);
  const int4::TileArgs a{&w, int4::alloc_packed_x(n, w), b.get(), out};
#pragma omp parallel num_threads(nt)
  {
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i) int4::pack_row(x, i, w, a.x);
    const Range rr = split_range(w.rows, kInt4Block, omp_get_thread_num(), omp_get_num_threads());
    for (int64_t r = rr.begin; r < rr.end; r += kInt4Block) int4::block_times_x(a, r, n);
  }
}

}  // namespace qmpi::cpu
