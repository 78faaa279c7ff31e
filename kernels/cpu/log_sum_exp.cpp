#include "kernels/cpu/log_sum_exp.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/simd_math.h"

namespace qmpi::cpu {

LogSumExp log_sum_exp(const float* x, int64_t n) {
  float mx = x[0];
  int64_t i = 0;
#if defined(__AVX512F__)
  __m512 vmax = _mm512_set1_ps(x[0]);
  for (; i + 16 <= n; i += 16) vmax = _mm512_max_ps(vmax, _mm512_loadu_ps(x + i));
  mx = _mm512_reduce_max_ps(vmax);
#endif
  for (; i < n; ++i) mx = std::max(mx, x[i]);

  // Float partial sums over runs of 1024 entries (each term <= 1, so a run's sum loses at most
  // ~1e-5 relative), added in double.
  double sum = 0.0;
  i = 0;
#if defined(__AVX512F__)
  constexpr int64_t kRun = 1024;
  const __m512 shift = _mm512_set1_ps(mx);
  for (; i + 16 <= n;) {
    __m512 acc = _mm512_setzero_ps();
    const int64_t end = std::min(n - 15, i + kRun);
    for (; i < end; i += 16)
      acc = _mm512_add_ps(acc, exp_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i), shift)));
    sum += double(_mm512_reduce_add_ps(acc));
  }
#endif
  for (; i < n; ++i) sum += std::exp(double(x[i]) - double(mx));
  return {mx, double(mx) + std::log(sum)};
}

}  // namespace qmpi::cpu
