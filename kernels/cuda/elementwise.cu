// The small element-wise kernels: SiLU-and-mul, residual add, row gather and weighted
// scatter-add, bias add and the float32 -> bf16/f16 conversion in front of 16-bit GEMMs.
#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/launchers.h"

namespace qmpi::cuda {
namespace {

// out16, when given, gets the bf16 rounding of the very float stored to out.
__global__ void silu_mul_kernel(const float* gate, const float* up, int64_t count, float* out,
                                __nv_bfloat16* out16) {
  for (int64_t i = global_thread(); i < count; i += grid_stride()) {
    const float g = gate[i];
    const float v = g / (1.0f + expf(-g)) * up[i];
    out[i] = v;
    if (out16) out16[i] = __float2bfloat16_rn(v);
  }
}

__global__ void add_kernel(float* x, const float* y, int64_t count) {
  for (int64_t i = global_thread(); i < count; i += grid_stride()) x[i] += y[i];
}

__global__ void gather_rows_kernel(const float* src, const int32_t* rows, int64_t count,
                                   int64_t width, float* dst) {
  const int64_t total = count * width;
  for (int64_t i = global_thread(); i < total; i += grid_stride())
    dst[i] = src[int64_t(rows[i / width]) * width + i % width];
}

// Rows are distinct within a call, so no two threads add into the same element.
__global__ void scatter_add_rows_kernel(const float* src, const int32_t* rows, const float* scales,
                                        int64_t count, int64_t width, float* dst) {
  const int64_t total = count * width;
  for (int64_t i = global_thread(); i < total; i += grid_stride()) {
    const int64_t r = i / width;
    dst[int64_t(rows[r]) * width + i % width] += scales[r] * src[i];
  }
}

template <class T>
__global__ void add_bias_kernel(float* out, int64_t n, int64_t width, const T* bias) {
  const int64_t total = n * width;
  for (int64_t i = global_thread(); i < total; i += grid_stride())
    out[i] += to_float(bias[i % width]);
}

template <class T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ __forceinline__ __half from_float<__half>(float v) {
  return __float2half_rn(v);
}

template <class T>
__global__ void convert_kernel(const float* x, int64_t count, T* out) {
  for (int64_t i = global_thread(); i < count; i += grid_stride()) out[i] = from_float<T>(x[i]);
}

}  // namespace

cudaError_t launch_silu_mul(const float* gate, const float* up, int64_t count, float* out,
                            void* out_bf16, cudaStream_t stream) {
  const LaunchShape s = elementwise_shape(count);
  if (s.empty()) return cudaSuccess;
  silu_mul_kernel<<<grid_of(s), s.block, 0, stream>>>(gate, up, count, out,
                                                      static_cast<__nv_bfloat16*>(out_bf16));
  return cudaGetLastError();
}

cudaError_t launch_add(float* x, const float* y, int64_t count, cudaStream_t stream) {
  const LaunchShape s = elementwise_shape(count);
  if (s.empty()) return cudaSuccess;
  add_kernel<<<grid_of(s), s.block, 0, stream>>>(x, y, count);
  return cudaGetLastError();
}

cudaError_t launch_gather_rows(const float* src, const int32_t* rows, int64_t count, int64_t width,
                               float* dst, cudaStream_t stream) {
  const LaunchShape s = elementwise_shape(count * width);
  if (s.empty()) return cudaSuccess;
  gather_rows_kernel<<<grid_of(s), s.block, 0, stream>>>(src, rows, count, width, dst);
  return cudaGetLastError();
}

cudaError_t launch_scatter_add_rows(const float* src, const int32_t* rows, const float* scales,
                                    int64_t count, int64_t width, float* dst, cudaStream_t stream) {
  const LaunchShape s = elementwise_shape(count * width);
  if (s.empty()) return cudaSuccess;
  scatter_add_rows_kernel<<<grid_of(s), s.block, 0, stream>>>(src, rows, scales, count, width, dst);
  return cudaGetLastError();
}

cudaError_t launch_add_bias(float* out, int64_t n, int64_t width, const void* bias, DType dtype,
                            cudaStream_t stream) {
  const LaunchShape s = elementwise_shape(n * width);
  if (s.empty()) return cudaSuccess;
  const bool known = dispatch_weight_type(dtype, [&]<class T>() {
    add_bias_kernel<T>
        <<<grid_of(s), s.block, 0, stream>>>(out, n, width, static_cast<const T*>(bias));
  });
  return known ? cudaGetLastError() : cudaErrorInvalidValue;
}

cudaError_t launch_convert_from_f32(const float* x, int64_t count, void* out, DType to,
                                    cudaStream_t stream) {
  const LaunchShape s = elementwise_shape(count);
  if (s.empty()) return cudaSuccess;
  if (to == DType::BF16) {
    convert_kernel<<<grid_of(s), s.block, 0, stream>>>(x, count, static_cast<__nv_bfloat16*>(out));
  } else if (to == DType::F16) {
    convert_kernel<<<grid_of(s), s.block, 0, stream>>>(x, count, static_cast<__half*>(out));
  } else {
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace qmpi::cuda
