#include "kernels/cpu/norm.h"

#include <cmath>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/parallel.h"

namespace qmpi::cpu {

void rmsnorm(const float* x, int64_t n, const WeightView& w, float eps, float* out, int threads) {
  const int64_t width = w.cols;
  AlignedArray<float> wf = widen(&w);
  const float* g = wf.get();
  const int nt = threads_for(threads, n * width, 1 << 16);
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float* xi = x + i * width;
    float* oi = out + i * width;
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int64_t c = 0; c < width; ++c) ss += xi[c] * xi[c];
    const float inv = 1.0f / std::sqrt(ss / float(width) + eps);
#pragma omp simd
    for (int64_t c = 0; c < width; ++c) oi[c] = (xi[c] * inv) * g[c];
  }
}

}  // namespace qmpi::cpu
