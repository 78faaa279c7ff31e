// How the CPU matmul paths share out the targets of a matmul group (MatmulTarget, Fp8Target):
// the weight rows of all targets, laid end to end, are split over the threads as one range, and
// each target's bias is widened to float32 once per call.
#pragma once
#include <algorithm>
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

// Calls f(target index, begin, end) for the rows of each target in thread t's share (of nt) of
// the rows of all targets, cut in units of `quantum` rows of each target (a target's last unit
// may be shorter), so that no tile is split between threads and every share of a target starts
// at a multiple of `quantum` (int4's 16-row blocks).
template <class Target, class F>
void for_each_share(std::span<const Target> targets, int64_t quantum, int t, int nt, F&& f) {
  const auto units = [&](const Target& tg) { return (tg.w.rows + quantum - 1) / quantum; };
  int64_t total = 0;
  for (const Target& tg : targets) total += units(tg);
  const Range share = split_range(total, 1, t, nt);
  int64_t offset = 0;
  for (size_t i = 0; i < targets.size(); ++i) {
    const int64_t b = std::max(share.begin, offset),
                  e = std::min(share.end, offset + units(targets[i]));
    if (b < e) f(i, (b - offset) * quantum, std::min(targets[i].w.rows, (e - offset) * quantum));
    offset += units(targets[i]);
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
