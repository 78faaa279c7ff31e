// Device helpers shared by the .cu files: weight element loads and warp/block sums.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "core/dtype.h"
#include "kernels/cuda/launch_shapes.h"

namespace qmpi::cuda {

template <class T>
__device__ __forceinline__ float to_float(T v);
template <>
__device__ __forceinline__ float to_float<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ float to_float<__half>(__half v) {
  return __half2float(v);
}
template <>
__device__ __forceinline__ float to_float<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int off = kWarp / 2; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int off = kWarp / 2; off > 0; off /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

// Sum over the whole block (blockDim.x a multiple of 32); every thread gets the result.
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float partial[kMaxBlock / kWarp];
  __shared__ float total;
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  v = warp_sum(v);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const int warps = blockDim.x / kWarp;
    float s = lane < warps ? partial[lane] : 0.0f;
    s = warp_sum(s);
    if (lane == 0) total = s;
  }
  __syncthreads();
  return total;
}

// Calls f.template operator()<T>() with T the CUDA element type of `dtype`; false if unsupported.
template <class F>
bool dispatch_weight_type(DType dtype, F&& f) {
  switch (dtype) {
    case DType::F32:
      f.template operator()<float>();
      return true;
    case DType::F16:
      f.template operator()<__half>();
      return true;
    case DType::BF16:
      f.template operator()<__nv_bfloat16>();
      return true;
    default:
      return false;
  }
}

inline dim3 grid_of(const LaunchShape& s) {
  return dim3(s.grid_x, s.grid_y, 1);
}

}  // namespace qmpi::cuda

namespace qmpi::cuda {

// Grid-stride loop bounds in 64-bit (activations of long prefills pass 2^31 elements).
__device__ __forceinline__ int64_t global_thread() {
  return int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_stride() {
  return int64_t(gridDim.x) * blockDim.x;
}

}  // namespace qmpi::cuda
