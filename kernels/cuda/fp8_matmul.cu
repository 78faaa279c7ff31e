// The FP8 matmul on the GPU: the e4m3 weight times its block scales, as bf16, for the cuBLAS
// GEMM every dense weight goes through (cuda_backend.cpp).
#include <cuda_fp8.h>

#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/fp8_launchers.h"

namespace qmpi::cuda {
namespace {

__global__ void dequant_kernel(Fp8Device w, __nv_bfloat16* dst) {
  const int64_t total = w.rows * w.cols;
  for (int64_t i = global_thread(); i < total; i += grid_stride()) {
    const int64_t r = i / w.cols, c = i % w.cols;
    const float s =
        w.scales[((r + w.row_offset) / w.block_n) * w.scale_cols + (c + w.col_offset) / w.block_k];
    const float v = __half2float(__half(__nv_cvt_fp8_to_halfraw(w.q[i], __NV_E4M3)));
    dst[i] = __float2bfloat16_rn(v * s);
  }
}

}  // namespace

cudaError_t launch_fp8_dequant_bf16(const Fp8Device& w, void* dst, cudaStream_t stream) {
  const LaunchShape s = elementwise_shape(w.rows * w.cols);
  if (s.empty()) return cudaSuccess;
  dequant_kernel<<<grid_of(s), s.block, 0, stream>>>(w, static_cast<__nv_bfloat16*>(dst));
  return cudaGetLastError();
}

}  // namespace qmpi::cuda
