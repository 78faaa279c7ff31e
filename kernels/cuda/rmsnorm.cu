#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/launchers.h"

namespace qmpi::cuda {
namespace {

// One block per row. With a residual y, the row normed is x + y, stored to `sum` (the caller's
// x) on the way, so the residual stream is read and written once for both ops. In place
// (out == x) is safe: every thread rereads only its own elements after the block-wide sum.
// out16, when given, gets the bf16 rounding of the very float stored to out.
template <class T>
__global__ void rmsnorm_kernel(const float* x, const float* y, float* sum, const T* w,
                               int64_t width, float eps, float* out, __nv_bfloat16* out16) {
  const int64_t at = int64_t(blockIdx.x) * width;
  const float* src = y ? sum + at : x + at;  // what the second pass scales
  float ss = 0.0f;
  for (int64_t c = threadIdx.x; c < width; c += blockDim.x) {
    float v = x[at + c];
    if (y) {
      v += y[at + c];
      sum[at + c] = v;
    }
    ss += v * v;
  }
  ss = block_sum(ss);
  const float inv = 1.0f / sqrtf(ss / float(width) + eps);
  for (int64_t c = threadIdx.x; c < width; c += blockDim.x) {
    const float v = src[c] * inv * to_float(w[c]);
    out[at + c] = v;
    if (out16) out16[at + c] = __float2bfloat16_rn(v);
  }
}

cudaError_t launch(const float* x, const float* y, float* sum, int64_t n, const void* w,
                   DType dtype, int64_t width, float eps, float* out, void* out_bf16,
                   cudaStream_t stream) {
  if (n <= 0 || width <= 0) return cudaSuccess;
  const LaunchShape s = row_shape(n, width);
  if (s.empty()) return cudaErrorInvalidConfiguration;
  const bool known = dispatch_weight_type(dtype, [&]<class T>() {
    rmsnorm_kernel<T><<<grid_of(s), s.block, 0, stream>>>(x, y, sum, static_cast<const T*>(w),
                                                          width, eps, out,
                                                          static_cast<__nv_bfloat16*>(out_bf16));
  });
  return known ? cudaGetLastError() : cudaErrorInvalidValue;
}

}  // namespace

cudaError_t launch_rmsnorm(const float* x, int64_t n, const void* w, DType dtype, int64_t width,
                           float eps, float* out, void* out_bf16, cudaStream_t stream) {
  return launch(x, nullptr, nullptr, n, w, dtype, width, eps, out, out_bf16, stream);
}

cudaError_t launch_add_rmsnorm(float* x, const float* y, int64_t n, const void* w, DType dtype,
                               int64_t width, float eps, float* out, void* out_bf16,
                               cudaStream_t stream) {
  return launch(x, y, x, n, w, dtype, width, eps, out, out_bf16, stream);
}

}  // namespace qmpi::cuda
