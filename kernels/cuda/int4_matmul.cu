// The int4 matmul on the GPU (Int4WeightView's layout): x gathered into packed-input order, then
// either a GEMV that dequantizes each word in registers (decode: up to kInt4GemvMaxRows rows of
// x, one warp per output row) or a dequantization of the whole weight to bf16 for the cuBLAS
// GEMM (prefill).
#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/int4_launchers.h"
#include "kernels/cuda/warp_gemv.cuh"

namespace qmpi::cuda {
namespace {

__global__ void gather_kernel(const float* x, int64_t n, int64_t in_features, int64_t kp,
                              const int32_t* x_index, float* dst) {
  const int64_t total = n * kp;
  for (int64_t i = global_thread(); i < total; i += grid_stride()) {
    const int64_t row = i / kp, k = i % kp;
    const int64_t src = x_index ? int64_t(x_index[k]) : (k < in_features ? k : -1);
    dst[i] = src < 0 ? 0.0f : x[row * in_features + src];
  }
}

// One warp per output row (warp_gemv.cuh); lanes stride over the words of each group.
__global__ void gemv_kernel(const float* xg, int n, int64_t kp, Int4Device w, float* out) {
  const int64_t row = gemv_row();
  if (row >= w.rows) return;
  GemvSums<int(kInt4GemvMaxRows)> sums;
  const uint32_t* q = w.qweight + row * w.words;
  for (int64_t g = 0; g < w.groups; ++g) {
    const float s = __half2float(__ushort_as_half(w.scales[row * w.groups + g]));
    const float z = float(w.zeros[row * w.groups + g]);
    for (int64_t v = w.group_words[g] + int64_t(threadIdx.x % kWarp); v < w.group_words[g + 1];
         v += kWarp) {
      const uint32_t word = q[v];
#pragma unroll
      for (int j = 0; j < 8; ++j)
        sums.add((float((word >> (4 * j)) & 15u) - z) * s, xg, n, kp, v * 8 + j);
    }
  }
  sums.store(n, out, w.rows, row);
}

// One thread per weight word: its 8 inputs as bf16 into dst[row, kp].
__global__ void dequant_kernel(Int4Device w, __nv_bfloat16* dst) {
  const int64_t total = w.rows * w.words;
  for (int64_t i = global_thread(); i < total; i += grid_stride()) {
    const int64_t row = i / w.words, v = i % w.words;
    // The group of word v: group_words is sorted, so a binary search over groups + 1 bounds.
    int64_t lo = 0, hi = w.groups;
    while (hi - lo > 1) {
      const int64_t mid = (lo + hi) / 2;
      if (w.group_words[mid] <= v)
        lo = mid;
      else
        hi = mid;
    }
    const float s = __half2float(__ushort_as_half(w.scales[row * w.groups + lo]));
    const float z = float(w.zeros[row * w.groups + lo]);
    const uint32_t word = w.qweight[i];
    for (int j = 0; j < 8; ++j)
      dst[i * 8 + j] = __float2bfloat16_rn((float((word >> (4 * j)) & 15u) - z) * s);
  }
}

}  // namespace

cudaError_t launch_int4_gather(const float* x, int64_t n, int64_t in_features, int64_t kp,
                               const int32_t* x_index, float* dst, cudaStream_t stream) {
  const LaunchShape s = elementwise_shape(n * kp);
  if (s.empty()) return cudaSuccess;
  gather_kernel<<<grid_of(s), s.block, 0, stream>>>(x, n, in_features, kp, x_index, dst);
  return cudaGetLastError();
}

cudaError_t launch_int4_gemv(const float* xg, int64_t n, const Int4Device& w, float* out,
                             cudaStream_t stream) {
  uint32_t blocks = 0;
  if (const cudaError_t e = gemv_grid(n, kInt4GemvMaxRows, w.rows, &blocks);
      e != cudaSuccess || blocks == 0)
    return e;
  gemv_kernel<<<blocks, kGemvThreads, 0, stream>>>(xg, int(n), w.words * 8, w, out);
  return cudaGetLastError();
}

cudaError_t launch_int4_dequant_bf16(const Int4Device& w, void* dst, cudaStream_t stream) {
  const LaunchShape s = elementwise_shape(w.rows * w.words);
  if (s.empty()) return cudaSuccess;
  dequant_kernel<<<grid_of(s), s.block, 0, stream>>>(w, static_cast<__nv_bfloat16*>(dst));
  return cudaGetLastError();
}

}  // namespace qmpi::cuda
