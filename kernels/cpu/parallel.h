// How the CPU kernels split work over OpenMP threads.
#pragma once
#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace qmpi::cpu {

// 0 means the OpenMP default (OMP_NUM_THREADS or the core count). Inside a parallel region
// (Backend::run_tasks: each task runs on one thread) a kernel keeps to its own thread.
inline int resolve_threads(int threads) {
  if (omp_in_parallel()) return 1;
  return threads > 0 ? threads : omp_get_max_threads();
}

// Threads worth starting for `work` units when one thread should get at least `grain` units:
// small decode-time ops stay on the calling thread instead of paying a fork/join.
inline int threads_for(int threads, int64_t work, int64_t grain) {
  int64_t useful = std::max<int64_t>(1, work / std::max<int64_t>(1, grain));
  return int(std::min<int64_t>(resolve_threads(threads), useful));
}

// The contiguous share [begin, end) of `count` items, in units of `quantum`, for thread t of nt.
struct Range {
  int64_t begin;
  int64_t end;
};
inline Range split_range(int64_t count, int64_t quantum, int t, int nt) {
  int64_t units = (count + quantum - 1) / quantum;
  int64_t b = units * t / nt * quantum;
  int64_t e = units * (t + 1) / nt * quantum;
  return {std::min(b, count), std::min(e, count)};
}

}  // namespace qmpi::cpu
