#include "kernels/cpu/log_sum_exp.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/simd_math.h"

namespace qmpi::cpu {

LogSumExp log_sum_exp(const float* x, int64_t n, float scale) {
  float mx = x[0];
  int64_t i = 0;
#if defined(QMPI_CPU_VEC)
  vec::F vmax = vec::splat(x[0]);
  for (; i + vec::kLanes <= n; i += vec::kLanes) vmax = vec::max(vmax, vec::load(x + i));
  mx = vec::max_of(vmax);
#endif
  for (; i < n; ++i) mx = std::max(mx, x[i]);

  // Float partial sums over runs of 1024 entries (each term <= 1, so a run's sum loses at most
  // ~1e-5 relative), added in double.
  double sum = 0.0;
  i = 0;
#if defined(QMPI_CPU_VEC)
  constexpr int64_t kRun = 1024;
  const vec::F shift = vec::splat(mx);
  const vec::F vscale = vec::splat(scale);
  for (; i + vec::kLanes <= n;) {
    vec::F acc = vec::zero();
    const int64_t end = std::min(n - (vec::kLanes - 1), i + kRun);
    for (; i < end; i += vec::kLanes)
      acc = vec::add(acc, exp_ps(vec::mul(vec::sub(vec::load(x + i), shift), vscale)));
    sum += double(vec::sum(acc));
  }
#endif
  for (; i < n; ++i) sum += std::exp((double(x[i]) - double(mx)) * double(scale));
  return {mx, double(mx) * double(scale) + std::log(sum)};
}

}  // namespace qmpi::cpu
