#include "kernels/cpu/membw.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "kernels/cpu/aligned.h"
#include "kernels/cpu/parallel.h"

namespace qmpi::cpu {

// The read is STREAM's (and bench/stream_read.c's): doubles summed by one plain loop per thread
// over a static share, vectorized by the compiler. The probe used to sum with four hand-unrolled
// AVX-512 accumulators, which read 35% faster than stream_read.c on the same host (39.5 vs 29
// GB/s): more than the weight-streaming decode GEMV gets, so "decode as a fraction of the
// bandwidth" flattered decode.
MembwStats read_bandwidth_stats(const MembwOptions& opt) {
  const int64_t n = int64_t(std::max<size_t>(opt.bytes / sizeof(double), 8));
  AlignedArray<double> buf = make_aligned<double>(size_t(n));
  double* a = buf.get();
  const int nt = resolve_threads(opt.threads);
  // First touch by the thread that later reads the page (NUMA placement), as STREAM does.
#pragma omp parallel for schedule(static) num_threads(nt)
  for (int64_t i = 0; i < n; ++i) a[i] = 1.0;
  std::vector<double> passes;
  volatile double sink = 0;
  for (int rep = 0; rep < std::max(1, opt.repeats); ++rep) {
    double total = 0;
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel for simd schedule(static) num_threads(nt) reduction(+ : total)
    for (int64_t i = 0; i < n; ++i) total += a[i];
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    sink = sink + total;
    passes.push_back(double(n) * sizeof(double) / s);
  }
  std::sort(passes.begin(), passes.end());
  return {passes.back(), passes[passes.size() / 2]};
}

double read_bandwidth(const MembwOptions& opt) {
  return read_bandwidth_stats(opt).best;
}

}  // namespace qmpi::cpu
