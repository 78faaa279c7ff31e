// log(sum(exp(x))) over a row of logits, for the sampler's log-probabilities: it runs over the
// whole vocabulary (152k entries for Qwen) for every sampled token, where libm's scalar exp
// costs about a millisecond per row.
#pragma once
#include <cstdint>

namespace qmpi::cpu {

struct LogSumExp {
  float max = 0.0f;  // the largest entry (the first one on ties is not tracked)
  double lse = 0.0;  // log(sum(exp(scale * x)))
};

// x[0, n), n >= 1, scale > 0 (the sampler's 1 / temperature). Accurate to a few float ulps of
// the sum (vector exp to ~2 ulp, partial sums in float over short runs, added in double).
LogSumExp log_sum_exp(const float* x, int64_t n, float scale = 1.0f);

}  // namespace qmpi::cpu
