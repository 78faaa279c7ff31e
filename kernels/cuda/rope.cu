#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/launchers.h"

namespace qmpi::cuda {
namespace {

// Thread per (token, pair i): the angle is computed once in double (positions reach 10^5, where
// a float angle would lose about 10^-2 rad) and applied to that pair of every head.
__global__ void rope_kernel(float* x, int64_t n, int32_t heads, int32_t head_dim,
                            const int32_t* positions, double log_theta) {
  const int32_t half = head_dim / 2;
  const int64_t total = n * half;
  for (int64_t idx = global_thread(); idx < total; idx += grid_stride()) {
    const int64_t t = idx / half;
    const int32_t i = int32_t(idx % half);
    const double inv_freq = exp(-(2.0 * i / head_dim) * log_theta);
    double sd, cd;
    sincos(double(positions[t]) * inv_freq, &sd, &cd);
    const float s = float(sd), c = float(cd);
    float* row = x + t * heads * head_dim;
    for (int32_t h = 0; h < heads; ++h) {
      float* v = row + int64_t(h) * head_dim;
      const float a = v[i], b = v[i + half];
      v[i] = a * c - b * s;
      v[i + half] = b * c + a * s;
    }
  }
}

}  // namespace

cudaError_t launch_rope(float* x, int64_t n, int32_t heads, int32_t head_dim,
                        const int32_t* positions, double theta, cudaStream_t stream) {
  if (n <= 0 || heads <= 0) return cudaSuccess;
  const LaunchShape s = rope_shape(n, head_dim);
  if (s.empty()) return cudaErrorInvalidValue;
  rope_kernel<<<grid_of(s), s.block, 0, stream>>>(x, n, heads, head_dim, positions, log(theta));
  return cudaGetLastError();
}

}  // namespace qmpi::cuda
