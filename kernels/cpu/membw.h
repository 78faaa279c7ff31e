// The machine's memory read bandwidth, measured the way STREAM does: read-and-sum a buffer far
// larger than the last-level cache. `qmpi bench` divides decode's bytes per second by it.
#pragma once
#include <cstddef>

namespace qmpi::cpu {

struct MembwOptions {
  size_t bytes = size_t(1) << 30;  // buffer size; keep it many times the L3 cache
  int threads = 0;                 // 0 = OpenMP default
  int repeats = 5;                 // the best pass counts
};

// Bytes read per second by the best of `repeats` passes over the buffer.
double read_bandwidth(const MembwOptions& opt = {});

}  // namespace qmpi::cpu
