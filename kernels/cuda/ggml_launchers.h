// Launchers of the GGUF matmul kernels (kernels/cuda/ggml_matmul.cu), over the device copy of a
// GgmlWeightView (core/ggml_types.h). Every pointer is device memory; every launcher enqueues on
// `stream` and returns the launch's error.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace qmpi::cuda {

// Rows of x the GEMV takes at once; more go through dequantization and cuBLAS.
inline constexpr int64_t kGgmlGemvMaxRows = 8;

// GgmlWeightView with its type's block shape, passed by value to the kernel.
struct GgmlDevice {
  const uint8_t* data;
  uint32_t type;  // GgmlType: a weight type
  int64_t rows, cols, row_bytes;
  int32_t block_elems, block_bytes;
};

// out[n, rows] = x[n, cols] . W^T for n <= kGgmlGemvMaxRows, without bias.
cudaError_t launch_ggml_gemv(const float* x, int64_t n, const GgmlDevice& w, float* out,
                             cudaStream_t stream);
// out[i, cols] = row ids[i] - row_offset of W decoded to float32 (as the CPU decodes it), zeros
// where that row is not in W (vocab-parallel embedding).
cudaError_t launch_ggml_embedding(const int32_t* ids, int64_t n, const GgmlDevice& w,
                                  int64_t row_offset, float* out, cudaStream_t stream);
// dst[rows, cols] = W as bf16 (each weight decoded as the CPU decodes it, then rounded), for the
// cuBLAS path.
cudaError_t launch_ggml_dequant_bf16(const GgmlDevice& w, void* dst, cudaStream_t stream);

}  // namespace qmpi::cuda
