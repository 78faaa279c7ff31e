// The device's achievable memory bandwidth, measured the way the roofline needs it: a large
// device-to-device copy timed with CUDA events, counting bytes read plus bytes written.
#pragma once
#include <cstddef>

namespace qmpi {

class CudaBackend;

// Copies src -> dst (device buffers of `bytes`, several times the L2 size) `repeats` times on
// the backend's stream after one warm-up copy; returns the median GB/s (1e9 bytes per second).
double measure_copy_bandwidth(CudaBackend& backend, const void* src, void* dst, size_t bytes,
                              int repeats);

}  // namespace qmpi
