// The machine's memory read bandwidth, measured the way STREAM does: read-and-sum a buffer far
// larger than the last-level cache. `qmpi bench` divides decode's bytes per second by it.
#pragma once
#include <cstddef>

namespace qmpi::cpu {

struct MembwOptions {
  size_t bytes = size_t(2) << 30;  // buffer size; keep it many times the L3 cache
  int threads = 0;                 // 0 = OpenMP default
  int repeats = 5;
};

// Bytes per second of the best and the median of `repeats` passes over the buffer. On a host
// shared with other work the median is the steadier figure; STREAM itself reports the best.
struct MembwStats {
  double best = 0.0;
  double median = 0.0;
};
MembwStats read_bandwidth_stats(const MembwOptions& opt = {});

// The best pass alone.
double read_bandwidth(const MembwOptions& opt = {});

}  // namespace qmpi::cpu
