#include "kernels/cpu/elementwise.h"

#include <cmath>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/simd_math.h"

namespace qmpi::cpu {
namespace {

constexpr int64_t kGrain = 1 << 16;  // elements per thread before a second thread pays off

void silu_mul_span(const float* g, const float* u, int64_t count, float* out) {
  int64_t i = 0;
#if defined(QMPI_CPU_VEC)
  const vec::F one = vec::splat(1.0f);
  for (; i + vec::kLanes <= count; i += vec::kLanes) {
    const vec::F gv = vec::load(g + i);
    const vec::F e = exp_ps(vec::sub(vec::zero(), gv));
    vec::store(out + i, vec::mul(vec::div(gv, vec::add(one, e)), vec::load(u + i)));
  }
#endif
  for (; i < count; ++i) out[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
}

}  // namespace

void silu_mul(const float* gate, const float* up, int64_t n, int64_t width, float* out,
              int threads) {
  const int64_t count = n * width;
  const int nt = threads_for(threads, count, kGrain);
#pragma omp parallel num_threads(nt)
  {
    const Range r = split_range(count, 16, omp_get_thread_num(), omp_get_num_threads());
    silu_mul_span(gate + r.begin, up + r.begin, r.end - r.begin, out + r.begin);
  }
}

void add(float* x, const float* y, int64_t count, int threads) {
  const int nt = threads_for(threads, count, kGrain);
#pragma omp parallel for simd num_threads(nt) schedule(static)
  for (int64_t i = 0; i < count; ++i) x[i] += y[i];
}

}  // namespace qmpi::cpu
