// Launcher of the FP8 dequantization kernel (kernels/cuda/fp8_matmul.cu), over the device arrays
// of an Fp8WeightView (kernel_types.h). Every pointer is device memory; the launcher enqueues on
// `stream` and returns the launch's error.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace qmpi::cuda {

// Fp8WeightView's arrays and block grid, passed by value to the kernel.
struct Fp8Device {
  const uint8_t* q;
  const float* scales;
  int64_t rows, cols, scale_cols, block_n, block_k, row_offset, col_offset;
};

// dst[rows, cols] = W as bf16 (e4m3 code times its block's scale), for the cuBLAS path.
cudaError_t launch_fp8_dequant_bf16(const Fp8Device& w, void* dst, cudaStream_t stream);

}  // namespace qmpi::cuda
