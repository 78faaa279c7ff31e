#include "kernels/cpu/membw.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "kernels/cpu/aligned.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/x86.h"

namespace qmpi::cpu {
namespace {

// Sum of p[0, n): independent accumulators keep the loads, not the adds, the bottleneck.
float sum_floats(const float* p, size_t n) {
#if defined(__AVX512F__)
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    a0 = _mm512_add_ps(a0, _mm512_load_ps(p + i));
    a1 = _mm512_add_ps(a1, _mm512_load_ps(p + i + 16));
    a2 = _mm512_add_ps(a2, _mm512_load_ps(p + i + 32));
    a3 = _mm512_add_ps(a3, _mm512_load_ps(p + i + 48));
  }
  float s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
  for (; i < n; ++i) s += p[i];
  return s;
#else
  constexpr int kLanes = 32;
  float acc[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
#pragma omp simd
    for (int j = 0; j < kLanes; ++j) acc[j] += p[i + j];
  float s = 0;
  for (; i < n; ++i) s += p[i];
  for (float a : acc) s += a;
  return s;
#endif
}

}  // namespace

MembwStats read_bandwidth_stats(const MembwOptions& opt) {
  // Whole cache lines per thread share, so every thread's slice is 64-byte aligned.
  const size_t count = std::max<size_t>(opt.bytes / sizeof(float) / 16 * 16, 16);
  AlignedArray<float> buf = make_aligned<float>(count);
  const int nt = resolve_threads(opt.threads);
  // First touch by the thread that later reads the page (NUMA placement).
#pragma omp parallel num_threads(nt)
  {
    const Range r = split_range(int64_t(count), 16, omp_get_thread_num(), omp_get_num_threads());
    std::fill(buf.get() + r.begin, buf.get() + r.end, 1.0f);
  }
  std::vector<double> passes;
  volatile float sink = 0;
  for (int rep = 0; rep < std::max(1, opt.repeats); ++rep) {
    float total = 0;
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(nt) reduction(+ : total)
    {
      const Range r = split_range(int64_t(count), 16, omp_get_thread_num(), omp_get_num_threads());
      total += sum_floats(buf.get() + r.begin, size_t(r.end - r.begin));
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    sink = sink + total;
    passes.push_back(double(count * sizeof(float)) / s);
  }
  std::sort(passes.begin(), passes.end());
  return {passes.back(), passes[passes.size() / 2]};
}

double read_bandwidth(const MembwOptions& opt) {
  return read_bandwidth_stats(opt).best;
}

}  // namespace qmpi::cpu
