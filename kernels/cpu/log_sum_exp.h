// log(sum(exp(x))) over a row of logits, for the sampler's log-probabilities: it runs over the
// whole vocabulary (152k entries for Qwen) for every sampled token, where libm's scalar exp
// costs about a millisecond per row.
#pragma once
#include <cstdint>

namespace qmpi::cpu {

struct LogSumExp {
  float max = 0.0f;  // the largest entry (the first one on ties is not tracked)
  double lse = 0.0;  // log(sum(exp(x)))
};

// x[0, n), n >= 1. Accurate to a few float ulps of the sum (vector exp to ~2 ulp, partial sums
// in float over short runs, added in double).
LogSumExp log_sum_exp(const float* x, int64_t n);

}  // namespace qmpi::cpu
