#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/launchers.h"

namespace qmpi::cuda {
namespace {

// Thread per (token, pair m): the angle is formed in float32 as Hugging Face (and the CPU
// backend) form it, its cos/sin taken in double, rounded and scaled by `attention` in float32,
// then applied to pair m of every head.
__global__ void rope_kernel(float* x, int64_t n, int32_t heads, int32_t head_dim,
                            const int32_t* positions, const float* inv_freq, bool per_token,
                            float attention) {
  const int32_t half = head_dim / 2;
  const int64_t total = n * half;
  for (int64_t idx = global_thread(); idx < total; idx += grid_stride()) {
    const int64_t t = idx / half;
    const int32_t m = int32_t(idx % half);
    const float angle = __fmul_rn(float(positions[t]), inv_freq[(per_token ? t * half : 0) + m]);
    double sd, cd;
    sincos(double(angle), &sd, &cd);
    const float s = __fmul_rn(float(sd), attention), c = __fmul_rn(float(cd), attention);
    float* row = x + t * heads * head_dim;
    for (int32_t h = 0; h < heads; ++h) {
      float* v = row + int64_t(h) * head_dim;
      const float a = v[m], b = v[m + half];
      v[m] = a * c - b * s;
      v[m + half] = b * c + a * s;
    }
  }
}

}  // namespace

cudaError_t launch_rope(float* x, int64_t n, int32_t heads, int32_t head_dim,
                        const int32_t* positions, const float* inv_freq, bool per_token,
                        float attention, cudaStream_t stream) {
  if (n <= 0 || heads <= 0) return cudaSuccess;
  const LaunchShape s = rope_shape(n, head_dim);
  if (s.empty()) return cudaErrorInvalidValue;
  rope_kernel<<<grid_of(s), s.block, 0, stream>>>(x, n, heads, head_dim, positions, inv_freq,
                                                  per_token, attention);
  return cudaGetLastError();
}

}  // namespace qmpi::cuda
