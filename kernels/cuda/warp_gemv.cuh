// What the quantized GEMVs share (int4_matmul.cu, ggml_matmul.cu): one warp per output row,
// kGemvWarpsPerBlock warps a block, up to kRows rows of x multiplied by each weight while it is
// in registers (decoded once for all of them), each row's sum reduced over the warp at the end.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/device_common.cuh"

namespace qmpi::cuda {

inline constexpr int kGemvWarpsPerBlock = 4;
inline constexpr uint32_t kGemvThreads = kGemvWarpsPerBlock * kWarp;

// The grid for `rows` output rows and n <= max_n rows of x into *blocks; cudaSuccess with
// *blocks 0 when there is nothing to do, cudaErrorInvalidValue past the limits.
inline cudaError_t gemv_grid(int64_t n, int64_t max_n, int64_t rows, uint32_t* blocks) {
  *blocks = 0;
  if (n <= 0 || rows <= 0) return cudaSuccess;
  const int64_t b = ceil_div(rows, int64_t(kGemvWarpsPerBlock));
  if (n > max_n || b > kMaxGridX) return cudaErrorInvalidValue;
  *blocks = uint32_t(b);
  return cudaSuccess;
}

// The output row of the calling warp (at or past `rows` for the last block's spare warps).
__device__ __forceinline__ int64_t gemv_row() {
  return int64_t(blockIdx.x) * kGemvWarpsPerBlock + threadIdx.x / kWarp;
}

// One lane's partial sums for the n rows of x.
template <int kRows>
struct GemvSums {
  float acc[kRows];

  __device__ __forceinline__ GemvSums() {
#pragma unroll
    for (int i = 0; i < kRows; ++i) acc[i] = 0.0f;
  }
  // acc[i] += wt * x[i * stride + col] for each row i < n.
  __device__ __forceinline__ void add(float wt, const float* x, int n, int64_t stride,
                                      int64_t col) {
#pragma unroll
    for (int i = 0; i < kRows; ++i)
      if (i < n) acc[i] += wt * x[int64_t(i) * stride + col];
  }
  // out[i, row] (rows per line of out) = the warp's sum of acc[i], written by lane 0.
  __device__ __forceinline__ void store(int n, float* out, int64_t rows, int64_t row) const {
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      if (i >= n) break;
      const float sum = warp_sum(acc[i]);
      if (threadIdx.x % kWarp == 0) out[int64_t(i) * rows + row] = sum;
    }
  }
};

}  // namespace qmpi::cuda
