#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/launchers.h"

namespace qmpi::cuda {
namespace {

template <class T>
__global__ void embedding_kernel(const int32_t* ids, const T* table, int64_t table_rows,
                                 int64_t width, int64_t row_offset, float* out) {
  const int64_t i = blockIdx.x;
  const int64_t r = int64_t(ids[i]) - row_offset;
  float* o = out + i * width;
  if (r >= 0 && r < table_rows) {
    const T* src = table + r * width;
    for (int64_t c = threadIdx.x; c < width; c += blockDim.x) o[c] = to_float(src[c]);
  } else {
    for (int64_t c = threadIdx.x; c < width; c += blockDim.x) o[c] = 0.0f;
  }
}

}  // namespace

cudaError_t launch_embedding(const int32_t* ids, int64_t n, const void* table, DType dtype,
                             int64_t table_rows, int64_t width, int64_t row_offset, float* out,
                             cudaStream_t stream) {
  if (n <= 0 || width <= 0) return cudaSuccess;
  const LaunchShape s = row_shape(n, width);
  if (s.empty()) return cudaErrorInvalidConfiguration;
  const bool known = dispatch_weight_type(dtype, [&]<class T>() {
    embedding_kernel<T><<<grid_of(s), s.block, 0, stream>>>(ids, static_cast<const T*>(table),
                                                            table_rows, width, row_offset, out);
  });
  return known ? cudaGetLastError() : cudaErrorInvalidValue;
}

}  // namespace qmpi::cuda
