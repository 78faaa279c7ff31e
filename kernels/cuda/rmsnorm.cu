#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/launchers.h"

namespace qmpi::cuda {
namespace {

// One block per row. In place (x == out) is safe: every thread rereads only its own elements
// after the block-wide sum.
template <class T>
__global__ void rmsnorm_kernel(const float* x, const T* w, int64_t width, float eps, float* out) {
  const float* xr = x + int64_t(blockIdx.x) * width;
  float* o = out + int64_t(blockIdx.x) * width;
  float ss = 0.0f;
  for (int64_t c = threadIdx.x; c < width; c += blockDim.x) ss += xr[c] * xr[c];
  ss = block_sum(ss);
  const float inv = 1.0f / sqrtf(ss / float(width) + eps);
  for (int64_t c = threadIdx.x; c < width; c += blockDim.x) o[c] = xr[c] * inv * to_float(w[c]);
}

}  // namespace

cudaError_t launch_rmsnorm(const float* x, int64_t n, const void* w, DType dtype, int64_t width,
                           float eps, float* out, cudaStream_t stream) {
  if (n <= 0 || width <= 0) return cudaSuccess;
  const LaunchShape s = row_shape(n, width);
  if (s.empty()) return cudaErrorInvalidConfiguration;
  const bool known = dispatch_weight_type(dtype, [&]<class T>() {
    rmsnorm_kernel<T>
        <<<grid_of(s), s.block, 0, stream>>>(x, static_cast<const T*>(w), width, eps, out);
  });
  return known ? cudaGetLastError() : cudaErrorInvalidValue;
}

}  // namespace qmpi::cuda
