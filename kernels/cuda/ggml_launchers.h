// Launcher of the GGUF dequantization kernel (kernels/cuda/ggml_matmul.cu), over the device copy
// of a GgmlWeightView (core/ggml_types.h). The pointer is device memory; the launcher enqueues on
// `stream` and returns the launch's error.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace qmpi::cuda {

// GgmlWeightView with its type's block shape, passed by value to the kernel.
struct GgmlDevice {
  const uint8_t* data;
  uint32_t type;  // GgmlType: a weight type
  int64_t rows, cols, row_bytes;
  int32_t block_elems, block_bytes;
};

// dst[rows, cols] = W as bf16 (each weight decoded as the CPU decodes it, then rounded), for the
// cuBLAS path.
cudaError_t launch_ggml_dequant_bf16(const GgmlDevice& w, void* dst, cudaStream_t stream);

}  // namespace qmpi::cuda
