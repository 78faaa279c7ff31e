// Launchers of the int4 matmul kernels (kernels/cuda/int4_matmul.cu), over the device arrays of
// an Int4WeightView (kernel_types.h). Every pointer is device memory; every launcher enqueues
// on `stream` and returns the launch's error.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace qmpi::cuda {

// Rows of x the GEMV takes at once; more go through dequantization and cuBLAS.
inline constexpr int64_t kInt4GemvMaxRows = 8;

// Int4WeightView's arrays, passed by value to the kernels.
struct Int4Device {
  const uint32_t* qweight;
  const uint16_t* scales;
  const uint8_t* zeros;
  const int32_t* group_words;
  int64_t rows;
  int64_t words;
  int64_t groups;
};

// dst[n, kp] = x[n, in_features] in packed-input order (x_index null: x[k] for k < in_features).
cudaError_t launch_int4_gather(const float* x, int64_t n, int64_t in_features, int64_t kp,
                               const int32_t* x_index, float* dst, cudaStream_t stream);
// out[n, rows] = xg[n, kp] . W^T for n <= kInt4GemvMaxRows, without bias.
cudaError_t launch_int4_gemv(const float* xg, int64_t n, const Int4Device& w, float* out,
                             cudaStream_t stream);
// dst[rows, words * 8] = W as bf16, for the cuBLAS path.
cudaError_t launch_int4_dequant_bf16(const Int4Device& w, void* dst, cudaStream_t stream);

}  // namespace qmpi::cuda
