// How the CPU matmul paths share out the targets of a matmul group (MatmulTarget, Fp8Target):
// the weight rows of all targets, laid end to end, are claimed by the threads in runs, and each
// target's bias is widened to float32 once per call.
#pragma once
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/cpu/aligned.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/parallel.h"
#include "kernels/kernel_types.h"

namespace qmpi::cpu {

template <class Target>
int64_t total_elements(std::span<const Target> targets) {
  int64_t sum = 0;
  for (const Target& t : targets) sum += t.w.rows * t.w.cols;
  return sum;
}

// Calls f(target index, begin, end) for runs of the rows of all targets (laid end to end) that
// this thread claims, cut in units of `quantum` rows of each target (a target's last unit may be
// shorter), so that no tile is split between threads and every run of a target starts at a
// multiple of `quantum` (int4's 16-row blocks). Every thread of the enclosing parallel region
// calls it with the same `next`, a counter at 0 shared by them and used for this call only. The
// runs are claimed as the threads get to them, large ones first (guided), not cut into equal
// shares: the two vCPUs of a shared host do not run at the same speed, and with equal shares the
// faster thread of a decode step's GEMVs waited for the other ~12% of the step (perf,
// qwen2.5-0.5b, 2 threads). A counter rather than `omp for schedule(dynamic)`, which sets up a
// work share on every call. Each output row is still one thread's, summed in the same order.
//
// With no counter (`next` null) each thread takes its equal share, one run: the int4 GEMV and
// the blocked GEMM on quantized rows (int4 and FP8 decoded to bf16), as they were. With claimed
// runs AWQ measured 4-10% slower end to end (decode and prefill, 3 alternating rounds, not
// understood); FP8 prefill was not measured either way.
template <class Target, class F>
void for_each_share(std::span<const Target> targets, int64_t quantum, std::atomic<int64_t>* next,
                    F&& f) {
  const auto units = [&](const Target& tg) { return (tg.w.rows + quantum - 1) / quantum; };
  int64_t total = 0;
  for (const Target& tg : targets) total += units(tg);
  const int64_t nt = omp_get_num_threads();
  const auto run = [&](int64_t b, int64_t e) {
    int64_t offset = 0;
    for (size_t i = 0; i < targets.size(); ++i) {
      const int64_t tb = std::max(b, offset), te = std::min(e, offset + units(targets[i]));
      if (tb < te)
        f(i, (tb - offset) * quantum, std::min(targets[i].w.rows, (te - offset) * quantum));
      offset += units(targets[i]);
    }
  };
  if (!next) {
    const Range share = split_range(total, 1, omp_get_thread_num(), int(nt));
    run(share.begin, share.end);
    return;
  }
  // Run j is units [start(j), start(j + 1)): half of an equal share of what is left, down to
  // 1/16 of an equal share of the whole.
  const int64_t least = std::max<int64_t>(1, total / (16 * nt));
  int64_t claimed = next->fetch_add(1, std::memory_order_relaxed);
  for (int64_t j = 0, b = 0; b < total; ++j) {
    const int64_t left = total - b;
    const int64_t e = b + std::min(left, std::max(least, left / (2 * nt)));
    if (j == claimed) {
      run(b, e);
      claimed = next->fetch_add(1, std::memory_order_relaxed);
    }
    b = e;
  }
}

// The targets' biases as float32 (null where a target has none).
using Biases = std::vector<AlignedArray<float>>;
template <class Target>
Biases widen_biases(std::span<const Target> targets) {
  Biases out;
  out.reserve(targets.size());
  for (const Target& t : targets) out.push_back(widen(t.bias));
  return out;
}

}  // namespace qmpi::cpu
