// Vector exp for softmax and SiLU: libm's expf does not vectorize, and these ops run over
// every score and every MLP activation.
#pragma once
#include <cmath>

#include "kernels/cpu/vec.h"
#include "kernels/cpu/x86.h"

namespace qmpi::cpu {

#if defined(QMPI_CPU_VEC)
// e^x to about 2 ulp: x = n ln2 + r with |r| <= ln2/2, e^r by its degree-7 Taylor polynomial
// (truncation error 5e-9), then scaled by 2^n (vec::scale_pow2, which also yields 0 and inf at
// the ends of the range).
inline vec::F exp_ps(vec::F x) {
  using namespace vec;
  x = min(max(x, splat(-104.0f)), splat(89.0f));
  const F n = round_nearest(mul(x, splat(1.44269504088896341f)));
  // ln2 split so that n * ln2_hi is exact.
  F r = fnma(n, splat(0.693145751953125f), x);
  r = fnma(n, splat(1.428606765330187045e-06f), r);
  F p = splat(1.0f / 5040);
  p = fma(p, r, splat(1.0f / 720));
  p = fma(p, r, splat(1.0f / 120));
  p = fma(p, r, splat(1.0f / 24));
  p = fma(p, r, splat(1.0f / 6));
  p = fma(p, r, splat(0.5f));
  p = fma(p, r, splat(1.0f));
  p = fma(p, r, splat(1.0f));
  return scale_pow2(p, n);
}
#endif

// x[i] = e^(x[i] - shift); returns the sum of the results.
inline float exp_shifted_sum(float* x, int64_t n, float shift) {
  int64_t i = 0;
  float sum = 0.0f;
#if defined(QMPI_CPU_VEC)
  const vec::F s = vec::splat(shift);
  vec::F acc = vec::zero();
  for (; i + vec::kLanes <= n; i += vec::kLanes) {
    const vec::F e = exp_ps(vec::sub(vec::load(x + i), s));
    vec::store(x + i, e);
    acc = vec::add(acc, e);
  }
  if (i < n) {
    const int rest = int(n - i);
    const vec::F e = exp_ps(vec::sub(vec::load_first(x + i, rest), s));
    vec::store_first(x + i, rest, e);
    acc = vec::add(acc, vec::keep_first(e, rest));
    i = n;
  }
  sum = vec::sum(acc);
#endif
  for (; i < n; ++i) sum += (x[i] = std::exp(x[i] - shift));
  return sum;
}

}  // namespace qmpi::cpu
